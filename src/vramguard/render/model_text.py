"""Text rendering of `vramguard model` reports (built by commands.model.build_report)."""

from __future__ import annotations

_GIB = 1 << 30


def _n(value: int | None) -> str:
    """Parameters in B/M with the exact count."""
    if value is None:
        return "-"
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f}{unit} ({value:,})"
    return f"{value:,}"


def _gib(value: int | None) -> str:
    """Bytes in GiB, or MiB / KiB / B for small values."""
    if value is None:
        return "-"
    for unit, size in (("GiB", _GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value} B"


def _src(report: dict, field: str) -> str:
    source = report["provenance"].get(field)
    return f"  [{source}]" if source else ""


def _checkpoint_diff(diff: int | None) -> str:
    """The checkpoint-minus-config parameter difference, in parentheses.

    NOTE: the report leaves the difference out (null) when the checkpoint holds no
    parameters (an empty or header-only file), as a comparison would mean nothing.
    """
    if diff is None:
        return "(the checkpoint holds no parameters: no comparison with the config)"
    return f"(checkpoint - config: {diff:+,})"


def render_model(r: dict) -> str:
    """The human-readable report of one model."""
    s, p, w, kv, ml = r["spec"], r["params"], r["weights"], r["kv_cache"], r["max_model_len"]
    out = [f"{r['model']}  ({r['architecture']}, model_type {r['model_type']})",
           f"source: {r['source_ref'] or '-'}", "", "architecture"]
    rows = [("layers", s["num_layers"], "num_layers"), ("hidden size", s["hidden_size"], "hidden_size"),
            ("attention heads", s["num_attention_heads"], "num_attention_heads"),
            ("KV heads", s["num_kv_heads"], "num_kv_heads"), ("head dim", s["head_dim"], "head_dim"),
            ("vocabulary", s["vocab_size"], "vocab_size"),
            ("intermediate size", s["intermediate_size"], "intermediate_size"),
            ("dtype", s["torch_dtype"], "torch_dtype"),
            ("tied embeddings", s["tie_word_embeddings"], "tie_word_embeddings")]
    out += [f"  {name:<20} {value if value is not None else '-'}{_src(r, key)}" for name, value, key in rows]
    kinds = ", ".join(f"{k} x{n}" for k, n in s["attention_kinds"].items())
    extra = []
    if s["sliding_window_tokens"]:
        extra.append(f"window {s['sliding_window_tokens']}")
    if s["chunk_size_tokens"]:
        extra.append(f"chunk {s['chunk_size_tokens']}")
    out.append(f"  {'layer kinds':<20} {kinds}{' (' + ', '.join(extra) + ')' if extra else ''}"
               f"{_src(r, 'layers')}")
    if s["moe"]:
        m = s["moe"]
        out.append(f"  {'MoE':<20} {m['num_experts']} experts, top-{m['num_experts_per_tok']}, "
                   f"expert ffn {m['moe_intermediate_size']}, shared {m['num_shared_experts']}, "
                   f"first dense {m['first_dense_layers']}{_src(r, 'moe')}")
    if s["vision"]:
        out.append(f"  {'vision/audio tower':<20} {_n(s['vision']['num_params'])}{_src(r, 'vision')}")
        inputs = s["vision"].get("modalities")
        if inputs:
            out.append(f"  {'encoder inputs':<20} {', '.join(inputs)}  [config]")
    if s["quant"]:
        q = s["quant"]
        out.append(f"  {'quantization':<20} {q['method']} ({q['bits'] or '?'} bits, "
                   f"{q['linear_bytes_per_param']:.4f} B/param linear"
                   + (f", experts {q['expert_bytes_per_param']:.4f}" if q["expert_bytes_per_param"] else "")
                   + (f", KV {q['kv_cache_scheme']}" if q["kv_cache_scheme"] else "") + f"){_src(r, 'quant')}")
    out += ["", "parameters",
            f"  {'total':<20} {_n(p['total'])}  [derived]",
            f"  {'active per token':<20} {_n(p['active'])}"]
    out += [f"    {k:<18} {_n(v)}" for k, v in p["by_component"].items() if v]
    if p["mtp_not_loaded"]:
        out.append(f"  {'MTP (not loaded)':<20} {_n(p['mtp_not_loaded'])}")
    if p["checkpoint"] is not None:
        out.append(f"  {'checkpoint tensors':<20} {_n(p['checkpoint'])}  [checkpoint]  "
                   + _checkpoint_diff(p["checkpoint_minus_config"]))
    out += ["", "weights (unsharded)",
            f"  {'16-bit':<20} {_gib(w['bf16_bytes'])}",
            f"  {'fp8':<20} {_gib(w['fp8_bytes'])}",
            f"  {'int4 (g128)':<20} {_gib(w['int4_bytes'])}"]
    if w["declared_method"]:
        out.append(f"  {'as declared':<20} {_gib(w['declared_bytes'])}  ({w['declared_method']})")
    ck = w["checkpoint"]
    if ck:
        approx = " (approximate)" if ck["approximate"] else ""
        dtypes = ", ".join(f"{k} {_gib(v)}" for k, v in sorted(ck["bytes_by_dtype"].items()))
        out.append(f"  {'checkpoint files':<20} {_gib(ck['total_bytes'])}{approx}  [checkpoint] "
                   f"{ck['format']}, {ck['num_tensors'] or '?'} tensors"
                   + (f": {dtypes}" if dtypes else ""))
        diff = w["checkpoint_minus_declared_bytes"]
        out.append(f"  {'files - declared':<20} {'+' if diff >= 0 else '-'}{_gib(abs(diff))}")
    bpt = kv["bytes_per_token"]
    out += ["", "KV cache (TP=1)",
            f"  {'bytes/token auto':<20} {bpt['auto']:,} ({kv['auto_dtype']})",
            f"  {'bytes/token bf16':<20} {bpt['bfloat16']:,}",
            f"  {'bytes/token fp8':<20} {bpt['fp8']:,}",
            f"  {'layers with KV':<20} {kv['layers_with_kv']}"]
    if kv["mamba_state_bytes_per_request"]:
        out.append(f"  {'mamba state/request':<20} {kv['mamba_state_bytes_per_request']:,} B")
    keys = ", ".join(f"{k}={v:,}" for k, v in s["max_len_keys"].items()) or "none"
    out += ["", f"max model length (vLLM {ml['vllm_version']})",
            f"  {'derived':<20} {ml['derived']:,} (from {ml['key']}; limit {ml['limit']:,})"
            f"{'  ' + ml['note'] if ml['note'] else ''}",
            f"  {'config keys':<20} {keys}{_src(r, 'max_len_keys')}"]
    if s["rope_scaling"]:
        rope = s["rope_scaling"]
        kind = rope.get("rope_type") or rope.get("type") if isinstance(rope, dict) else None
        out.append(f"  {'rope scaling':<20} {kind or '-'}"
                   + (f" x{rope.get('factor')}" if isinstance(rope, dict) and rope.get("factor") else ""))
    by_source: dict[str, list[str]] = {}
    for field, source in r["provenance"].items():
        by_source.setdefault(source, []).append(field)
    out += ["", "sources"] + [f"  {source:<12} {', '.join(fields)}"
                              for source, fields in sorted(by_source.items())]
    if r["notes"]:
        out += ["", "notes"] + [f"  - {n}" for n in r["notes"]]
    return "\n".join(out)


def render_list(rows: list[dict], search: str | None) -> str:
    """The catalog listing."""
    if not rows:
        return f"no catalog model matches {search!r}" if search else "the catalog is empty"
    width = max(len(r["model_id"]) for r in rows)
    tw = max(len(r.get("model_type") or "-") for r in rows)
    lines = [f"{'model':<{width}}  {'type':<{tw}}  published"]
    lines += [f"{r['model_id']:<{width}}  {r.get('model_type') or '-':<{tw}}  "
              f"{r['published_params'] or '-'}" for r in rows]
    lines.append(f"{len(rows)} model(s) in the embedded catalog")
    return "\n".join(lines)
