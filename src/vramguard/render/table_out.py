"""`vramguard table` output: Markdown (for a wiki), CSV (bytes, for spreadsheets) or JSON.

Takes the rows `core.table.sizing_table` computed; only converts bytes to GiB/MiB/KiB.
"""

from __future__ import annotations

import csv
import io

from ..core.table import TableRequest, TableRow

_GIB, _MIB, _KIB = 1 << 30, 1 << 20, 1 << 10


def _size(n: int) -> str:
    if n >= _GIB:
        return f"{n / _GIB:.1f} GiB"
    if n >= _MIB:
        return f"{n / _MIB:.0f} MiB"
    return f"{n / _KIB:.0f} KiB" if n >= _KIB else f"{n} B"


def _params(n: int) -> str:
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def _fit_cell(fit) -> str:
    if fit.refused:
        return "no (refused: note)"
    if fit.tensor_parallel_size is None:
        return "no (TP ≤ 8)"
    return f"TP{fit.tensor_parallel_size} ({fit.max_concurrency:,.0f}x)"


def _name(row: TableRow) -> str:
    return row.model if row.label == row.model else f"{row.label} ({row.model})"


def markdown(rows: tuple[TableRow, ...], req: TableRequest) -> str:
    """A GitHub-flavoured Markdown table and a legend."""
    L, N = req.max_model_len, req.concurrency
    gpus = [g.name for g in req.gpus]
    head = (["model", "params", "weights", "KV/token", f"KV/seq @{L}", f"KV x{N}",
             f"total (TP1, {gpus[0]})"] + gpus)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        if r.error:
            lines.append("| " + " | ".join([_name(r), _params(r.num_params)]
                                          + [f"error: {r.error}"] + [""] * (len(head) - 3)) + " |")
            continue
        total = _size(r.total_bytes) + (f" (on {r.bytes_gpu})" if r.bytes_gpu
                                         and r.bytes_gpu != gpus[0] else "")
        cells = [_name(r), _params(r.num_params), _size(r.weights_bytes),
                 _size(r.kv_bytes_per_token), _size(r.kv_per_sequence_bytes),
                 _size(r.kv_concurrent_bytes), total]
        cells += [_fit_cell(f) for f in r.fits]
        lines.append("| " + " | ".join(cells) + " |")
    dtype = req.kv_cache_dtype if req.kv_cache_dtype != "auto" else "model dtype"
    util = (f"{req.gpu_memory_utilization:g}" if req.gpu_memory_utilization is not None
            else "vLLM's default")
    lines += ["", f"max_model_len {L}, {N} concurrent sequences, weights {req.dtype}, "
              f"KV cache {dtype}, gpu_memory_utilization {util}, vLLM "
              f"{req.vllm_version or 'newest known'}. Bytes are for the whole model (TP=1). "
              "total = weights + activation peak + non-torch + CUDA graphs + KV for "
              f"{N} sequences + CUDA context, from the planner's ledger. A GPU cell is the "
              f"smallest tensor-parallel size at which vLLM starts and the KV pool holds {N} "
              f"sequences of {L} tokens (max concurrency in brackets); 'no' when TP 8 does "
              "not."]
    notes = sorted({n for r in rows for n in r.notes})
    lines += [f"Note: {n}." for n in notes]
    lines += [f"Note: {r.model} on {f.gpu}: vLLM refuses it: {f.refused}"
              for r in rows for f in r.fits if f.refused]
    return "\n".join(lines) + "\n"


CSV_FIELDS = ("label", "model", "num_params", "weights_bytes", "kv_bytes_per_token",
              "kv_per_sequence_bytes", "kv_concurrent_bytes", "activation_bytes",
              "non_torch_bytes", "cuda_graph_bytes", "context_bytes", "total_bytes", "error",
              "bytes_gpu")


def csv_text(rows: tuple[TableRow, ...], req: TableRequest) -> str:
    """One line per model: bytes as integers, then `<gpu>_tp` and `<gpu>_max_concurrency`."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    gpus = [g.name for g in req.gpus]
    w.writerow(list(CSV_FIELDS) + [f"{g}_tp" for g in gpus] + [f"{g}_max_concurrency" for g in gpus])
    for r in rows:
        fits = {f.gpu: f for f in r.fits}
        tps = [fits[g].tensor_parallel_size if g in fits and fits[g].tensor_parallel_size
               else "" for g in gpus]
        concs = [f"{fits[g].max_concurrency:.2f}" if g in fits and fits[g].max_concurrency
                 is not None else "" for g in gpus]
        w.writerow([getattr(r, k) if getattr(r, k) is not None else "" for k in CSV_FIELDS]
                   + tps + concs)
    return buf.getvalue()


def json_doc(rows: tuple[TableRow, ...], req: TableRequest) -> dict:
    return {"max_model_len": req.max_model_len, "concurrency": req.concurrency,
            "dtype": req.dtype, "kv_cache_dtype": req.kv_cache_dtype,
            "gpu_memory_utilization": req.gpu_memory_utilization,
            "vllm_version": req.vllm_version, "gpus": [g.name for g in req.gpus],
            "rows": [r.to_dict() for r in rows]}
