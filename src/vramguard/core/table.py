"""The sizing table operators keep on a wiki, computed from real architectures.

For each model: weights, KV bytes per token, KV of one full-length sequence, KV of N
concurrent sequences, and the total with activations, non-torch memory, CUDA graphs and the
CUDA context — every figure read from the planner's ledger of a TP=1 plan — then, for each
GPU, the smallest tensor-parallel size at which vLLM starts and the pool holds N sequences
of `max_model_len` (the planner's outcome and max concurrency). Pure: specs in, rows out.

Size labels (`7B`) map to representative catalog models (`SIZE_MODELS`, docs/tune.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import UsageError
from .gpu import GpuSpec
from .model import ModelSpec
from .plan import Plan
from .planner import plan as plan_startup
from .settings import Settings

# size label -> representative model in the embedded catalog (dense, instruct where shipped)
SIZE_MODELS: dict[str, str] = {
    "0.5B": "Qwen/Qwen2.5-0.5B",
    "1B": "meta-llama/Llama-3.2-1B-Instruct",
    "1.5B": "Qwen/Qwen2.5-1.5B-Instruct",
    "2B": "google/gemma-2-2b-it",
    "3B": "meta-llama/Llama-3.2-3B-Instruct",
    "4B": "Qwen/Qwen3-4B",
    "7B": "Qwen/Qwen2.5-7B-Instruct",
    "8B": "meta-llama/Llama-3.1-8B-Instruct",
    "9B": "google/gemma-2-9b-it",
    "13B": "Qwen/Qwen2.5-14B",           # NOTE: no 13B in the catalog; the nearest dense one
    "14B": "Qwen/Qwen2.5-14B",
    "27B": "google/gemma-2-27b-it",
    "32B": "Qwen/Qwen2.5-32B-Instruct",
    "34B": "01-ai/Yi-34B",
    "70B": "meta-llama/Llama-3.1-70B-Instruct",
    "72B": "Qwen/Qwen2.5-72B-Instruct",
    "405B": "meta-llama/Llama-3.1-405B",
}
DEFAULT_MODELS = ("1B", "8B", "70B")
DEFAULT_GPUS = ("L4", "A100-80GB", "H100-80GB", "H200")
TP_SIZES = (1, 2, 4, 8)

_LABEL = re.compile(r"^\d+(\.\d+)?[bB]$")


def model_for_label(text: str) -> str:
    """`7B`/`7b` -> its representative model id; any other text is returned as given.
    A size label without a representative raises UsageError listing the known ones."""
    t = text.strip()
    if not _LABEL.match(t):
        return t
    key = t[:-1] + "B"
    if key in SIZE_MODELS:
        return SIZE_MODELS[key]
    raise UsageError(f"no representative model for {t!r}", where="--models",
                     fix=f"Use one of {', '.join(SIZE_MODELS)} or a model id")


@dataclass(frozen=True)
class GpuFit:
    """The smallest TP at which N sequences of max_model_len fit on one GPU kind."""

    gpu: str
    tensor_parallel_size: int | None        # None: no TP in TP_SIZES fits
    max_concurrency: float | None           # at that TP (the planner's)
    failure: str | None = None              # the planner's failure at TP=1, if any
    tried: tuple[tuple[int, bool, float | None, str | None], ...] = ()   # (tp, fits, conc, failure)
    refused: str | None = None              # vLLM refuses the model on this GPU at every TP

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "tensor_parallel_size": self.tensor_parallel_size,
                "max_concurrency": None if self.max_concurrency is None
                else round(self.max_concurrency, 2),
                "failure_at_tp1": self.failure, "refused": self.refused,
                "tried": [{"tensor_parallel_size": t, "fits": f,
                           "max_concurrency": None if c is None else round(c, 2),
                           "failure": x} for t, f, c, x in self.tried]}


@dataclass(frozen=True)
class TableRow:
    """One model of the table (bytes for the whole model, i.e. TP=1)."""

    label: str
    model: str
    num_params: int
    weights_bytes: int
    kv_bytes_per_token: int
    kv_per_sequence_bytes: int
    kv_concurrent_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    context_bytes: int
    total_bytes: int
    fits: tuple[GpuFit, ...] = ()
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    bytes_gpu: str = ""           # the GPU whose TP=1 ledger gave the bytes (the first that
                                  # vLLM does not refuse the model on)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in (
            "label", "model", "num_params", "weights_bytes", "kv_bytes_per_token",
            "kv_per_sequence_bytes", "kv_concurrent_bytes", "activation_bytes",
            "non_torch_bytes", "cuda_graph_bytes", "context_bytes", "total_bytes", "error",
            "bytes_gpu")}
        d["fits"] = [f.to_dict() for f in self.fits]
        d["notes"] = list(self.notes)
        return d


@dataclass(frozen=True)
class TableRequest:
    models: tuple[tuple[str, ModelSpec], ...]     # (label, spec)
    gpus: tuple[GpuSpec, ...]
    max_model_len: int = 4096
    concurrency: int = 32
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float | None = None   # None: the version's default
    vllm_version: str | None = None


def _settings(req: TableRequest, tp: int) -> Settings:
    changes = {"tensor_parallel_size": tp, "max_model_len": req.max_model_len,
               "max_num_seqs": req.concurrency, "dtype": req.dtype,
               "kv_cache_dtype": req.kv_cache_dtype}
    if req.gpu_memory_utilization is not None:
        changes["gpu_memory_utilization"] = req.gpu_memory_utilization
    if req.concurrency > 2048:
        changes["max_num_batched_tokens"] = req.concurrency
    return Settings(**changes, user_set=frozenset(changes))


def _fits(p: Plan | None, n: int) -> bool:
    return (p is not None and p.outcome.ok and not p.outcome.risks and p.kv is not None
            and p.kv.max_concurrency >= n)


def _gpu_fit(req: TableRequest, spec: ModelSpec, gpu: GpuSpec) -> GpuFit:
    heads = spec.num_attention_heads or 1
    tried = []
    first_failure = None
    refusals: list[str] = []
    for tp in TP_SIZES:
        if heads % tp:
            continue
        try:
            p = plan_startup(spec, _settings(req, tp), gpu, vllm_version=req.vllm_version)
        except UsageError as exc:
            tried.append((tp, False, None, exc.what[:80]))
            refusals.append(_cell_text(exc))
            continue
        ok = _fits(p, req.concurrency)
        conc = p.kv.max_concurrency if p.kv else None
        failure = p.outcome.failure or ("risk" if p.outcome.risks else None)
        if tp == 1:
            first_failure = failure
        tried.append((tp, ok, conc, failure))
        if ok:
            return GpuFit(gpu.name, tp, conc, first_failure, tuple(tried))
    # NOTE: refused at every TP tried, and for one reason: the model on this GPU (a
    # quantization this GPU cannot run, bfloat16 on an old GPU), not a size
    refused = (refusals[0] if refusals and len(refusals) == len(tried)
               and len(set(refusals)) == 1 else None)
    return GpuFit(gpu.name, None, None, first_failure, tuple(tried), refused)


def _cell_text(exc: UsageError) -> str:
    """vLLM's validation messages run to several sentences: the first one and the fix fit
    a table cell (`vramguard plan` prints the whole message). A message vLLM raised with
    several arguments prints as a tuple: kept whole."""
    what = exc.what
    first = what[:what.index("')") + 2] if what.startswith("('") and "')" in what else \
        what.split(". ")[0].rstrip(".")
    return f"{first}. {exc.fix}" if exc.fix else first


def _bytes_plan(req: TableRequest, spec: ModelSpec) -> tuple[Plan, GpuSpec]:
    """The TP=1 plan of the first GPU that vLLM does not refuse the model on (the first
    GPU's refusal when every one does)."""
    first = None
    for gpu in req.gpus:
        try:
            return plan_startup(spec, _settings(req, 1), gpu, vllm_version=req.vllm_version), gpu
        except UsageError as exc:
            first = first or exc
    raise first


def table_row(req: TableRequest, label: str, spec: ModelSpec) -> TableRow:
    """One row: the TP=1 ledger on the first GPU vLLM runs the model on (the bytes), then
    the fit per GPU."""
    try:
        p, gpu = _bytes_plan(req, spec)
    except UsageError as exc:
        return TableRow(label, spec.name, spec.num_params(), 0, 0, 0, 0, 0, 0, 0, 0, 0,
                        error=_cell_text(exc))
    t = p.tightest
    kv = p.kv if p.kv is not None else _kv_layout_plan(req, spec, p, gpu)
    per_seq = kv.blocks_per_request * kv.page_size_bytes if kv else 0
    conc_bytes = per_seq * req.concurrency
    context = t.total.value_bytes - t.free_at_start.value_bytes
    total = (t.weights.value_bytes + t.activation.value_bytes + t.non_torch.value_bytes
             + t.cuda_graph.value_bytes + conc_bytes + context)
    notes = ()
    if kv and kv.bytes_per_token * kv.max_model_len != per_seq:
        notes = ("KV per sequence follows vLLM's blocks per request (sliding-window, "
                 "hybrid or block rounding), not bytes/token x length",)
    fits = tuple(_gpu_fit(req, spec, g) for g in req.gpus)
    return TableRow(label, spec.name, spec.num_params(), t.weights.value_bytes,
                    kv.bytes_per_token if kv else t.kv_bytes_per_token, per_seq, conc_bytes,
                    t.activation.value_bytes, t.non_torch.value_bytes, t.cuda_graph.value_bytes,
                    context, total, fits, None, notes, gpu.name)


def _kv_layout_plan(req: TableRequest, spec: ModelSpec, failed: Plan, on: GpuSpec):
    """The KV capacity facts (bytes/token, blocks per request) when the model does not
    start at TP=1 on the GPU `on`: the same plan on a copy of that GPU with room for the
    weights, batched tokens pinned to what the real plan resolved (same activation)."""
    from dataclasses import replace
    s = _settings(req, 1)
    tokens = failed.settings.get("max_num_batched_tokens")
    if tokens:
        s = replace(s, max_num_batched_tokens=int(tokens),
                    user_set=s.user_set | {"max_num_batched_tokens"})
    big = max(on.total_bytes * 16, 2 * failed.tightest.weights.value_bytes + (64 << 30))
    gpu = replace(on, total_bytes=big)
    try:
        return plan_startup(spec, s, gpu, vllm_version=req.vllm_version).kv
    except UsageError:
        return None


def sizing_table(req: TableRequest) -> tuple[TableRow, ...]:
    """Every model's row (see the module docstring)."""
    if not req.gpus:
        raise UsageError("no GPU given", where="--gpus", fix="Name at least one GPU")
    if req.max_model_len < 1 or req.concurrency < 1:
        raise UsageError("--max-model-len and --concurrency must be >= 1",
                         where="--max-model-len/--concurrency")
    return tuple(table_row(req, label, spec) for label, spec in req.models)
