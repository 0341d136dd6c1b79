"""From an `Extracted` log to a diagnosis: the failed phase, the failure kind, the cause in
plain words and fixes as concrete vLLM flags computed from the log's own numbers.

Pure: no I/O. `diagnose(extracted)` never raises on content.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..core import failures as F
from ..core.plan import Fix
from . import extracted as X
from .extracted import Extracted, LogError, phase_index
from .diagnose_oom import (_ceil2, _floor2, _g, _graph_oom, _kv_allocation_oom, _oom_numbers,
                           _runtime_oom, _sampler)
from .versions import version_tuple

OTHER = "other"          # an error outside the failure vocabulary (shm, swap space, config)

# Specific error kinds (parser.py) -> failure, in order of precedence: vLLM's own memory
# messages first, then raw OOMs (mapped by phase), then distributed, then generic failures.
_KIND_FAILURE = {
    "free_memory": F.FREE_MEMORY_BELOW_REQUEST, "engine_budget": F.FREE_MEMORY_BELOW_REQUEST,
    "external_weights": F.FREE_MEMORY_BELOW_REQUEST, "cpu_kv_memory": F.FREE_MEMORY_BELOW_REQUEST,
    "weights_oom": F.WEIGHTS_OOM, "mamba_blocks": F.MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS,
    "kv_fit": F.KV_BELOW_MAX_MODEL_LEN, "kv_fit_v0": F.KV_BELOW_MAX_MODEL_LEN,
    "autofit_fail": F.KV_BELOW_MAX_MODEL_LEN, "no_kv_memory": F.NO_KV_MEMORY,
    "sampler_oom": F.SAMPLER_WARMUP_OOM, "profiling_error": OTHER,
    "max_model_len_config": OTHER, "block_size": OTHER, "swap_space": OTHER, "shm": OTHER,
    "spec_config": OTHER, "dcp_config": OTHER,
    "torch_oom": None, "distributed": F.DISTRIBUTED,
}
_GENERIC = ("cuda_error", "exception", "engine_failed", "error_line")


@dataclass(frozen=True)
class Diagnosis:
    """The verdict on one log. `to_dict()` is `vramguard diagnose --json`."""

    status: str                         # "started" | "failed" | "incomplete" | "empty"
    phase: str | None                   # the failed phase, else the phase reached
    failure: str | None
    confidence: str                     # "stated" (vLLM's message) | "inferred" | "none"
    cause: str
    fixes: tuple[Fix, ...] = ()
    numbers: dict = field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    summary: dict | None = None         # a healthy startup: KV pool, tokens, concurrency
    extracted: Extracted | None = None

    def to_dict(self) -> dict:
        return {"status": self.status, "phase": self.phase, "failure": self.failure,
                "confidence": self.confidence, "cause": self.cause,
                "fixes": [f.to_dict() for f in self.fixes], "numbers": dict(self.numbers),
                "evidence": list(self.evidence), "notes": list(self.notes),
                "summary": self.summary,
                "extracted": self.extracted.to_dict() if self.extracted else None}


# ---- the context every fix needs -------------------------------------------------------

def _num(value) -> float | None:
    """A finite number of a plausible size, else None (a log is untrusted input)."""
    try:
        x = float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError, OverflowError):
        return None
    return x if x is not None and math.isfinite(x) and abs(x) < 1e15 else None


@dataclass(frozen=True)
class _Ctx:
    ex: Extracted
    version: tuple[int, int, int] | None
    total: float | None
    util: float | None
    util_given: bool
    tp: int
    pp: int
    max_model_len: int | None
    max_num_seqs: int | None
    batched_tokens: int | None
    kv_dtype: str
    eager: bool

    @property
    def requested(self) -> float | None:
        if self.ex.requested_gib is not None:
            return self.ex.requested_gib
        if self.total is not None and self.util is not None:
            return round(self.total * self.util, 2)
        return None


def _ctx(ex: Extracted) -> _Ctx:
    s = ex.settings
    version = version_tuple(ex.version)
    oom_totals = [e.oom.total_gib for e in ex.errors if e.oom and e.oom.total_gib]
    total = ex.total_gpu_gib or next((e.numbers.get("total_gib") for e in ex.errors
                                      if e.numbers.get("total_gib")), None) \
        or (oom_totals[0] if oom_totals else None)
    util = ex.gpu_memory_utilization or _num(s.get("gpu_memory_utilization"))
    given = util is not None
    if util is None and ex.device != "cpu":
        util = 0.92 if version and version >= (0, 20, 0) else 0.90
    tp = int(_num(s.get("tensor_parallel_size")) or 1)
    pp = int(_num(s.get("pipeline_parallel_size")) or 1)
    mml = s.get("max_model_len")
    tokens = int(_num(s.get("max_num_batched_tokens")) or 0) or None
    seqs = int(_num(s.get("max_num_seqs")) or 0) or None
    if tokens is None or seqs is None:
        d_tokens, d_seqs = _scheduler_defaults(ex, version, total, tp * pp)
        tokens, seqs = tokens or d_tokens, seqs or d_seqs
    return _Ctx(ex, version, total, util, given, tp, pp,
                ex.max_model_len or (mml if isinstance(mml, int) and mml > 0 else None),
                seqs, tokens, str(s.get("kv_cache_dtype") or "auto"),
                bool(s.get("enforce_eager")))


def _scheduler_defaults(ex: Extracted, version, total, world: int):
    """vLLM's v1 (max_num_batched_tokens, max_num_seqs) defaults for this log, if known."""
    if version is None or total is None or ex.engine == "v0":
        return None, None
    try:
        from ..core.rules import resolve_rules
        from ..core.sched import scheduler_defaults
        rules = resolve_rules(".".join(map(str, version)), "v1")
        return scheduler_defaults(rules, ex.gpu_name or "", total,
                                  device="cpu" if ex.device == "cpu" else "cuda",
                                  world_size=world)
    except Exception:          # NOTE: a default we cannot tell only makes the fix vaguer
        return None, None


# ---- choosing the failure --------------------------------------------------------------

def _pick(ex: Extracted) -> tuple[LogError | None, str | None]:
    """The root-cause error and its failure kind (None when only generic errors exist)."""
    order = list(_KIND_FAILURE) + list(_GENERIC)
    ranked = sorted(ex.errors, key=lambda e: (order.index(e.kind) if e.kind in order
                                              else len(order), e.seq))
    for err in ranked:
        if err.kind == "torch_oom":
            return err, _oom_failure(err.phase, ex, err.numbers.get("frame"))
        if err.kind in _KIND_FAILURE:
            return err, _KIND_FAILURE[err.kind]
    return (ranked[0], None) if ranked else (None, None)


def _oom_failure(phase: str, ex: Extracted, frame: str | None = None) -> str:
    """The failure of a raw torch OOM by phase; after the KV lines without a traceback frame
    that says otherwise, the graph capture (it logs nothing before it allocates)."""
    if phase == X.KV_ALLOCATION and frame:
        return F.NO_KV_MEMORY
    idx = phase_index(phase)
    if idx <= phase_index(X.WEIGHT_LOADING):
        return F.WEIGHTS_OOM
    if phase == X.PROFILING:
        return F.PROFILE_RUN_OOM
    if phase in (X.KV_ALLOCATION, X.CUDA_GRAPH_CAPTURE):
        return F.CUDA_GRAPH_OOM
    if phase == X.SAMPLER_WARMUP:
        return F.SAMPLER_WARMUP_OOM
    return F.RUNTIME_OOM


def _implied(ex: Extracted) -> tuple[str | None, str]:
    """A failure the numbers imply even without its message: (failure, why)."""
    if ex.available_kv_gib is not None and ex.available_kv_gib <= 0:
        return F.NO_KV_MEMORY, f"vLLM computed {ex.available_kv_gib} GiB for the KV cache"
    if ex.profile_kv_gib is not None and ex.profile_kv_gib <= 0:
        return F.NO_KV_MEMORY, f"vLLM computed {ex.profile_kv_gib} GiB for the KV cache"
    if ex.num_gpu_blocks == 0:
        return F.NO_KV_MEMORY, "vLLM computed 0 GPU blocks"
    if ex.engine == "v0" and ex.max_concurrency is not None and ex.max_concurrency < 1:
        return F.KV_BELOW_MAX_MODEL_LEN, (f"maximum concurrency {ex.max_concurrency}x < 1: one "
                                          "request of max_model_len does not fit")
    return None, ""


# ---- the entry point -------------------------------------------------------------------

def diagnose(ex: Extracted) -> Diagnosis:
    """Explain one parsed log (see module docstring)."""
    c = _ctx(ex)
    err, failure = _pick(ex)
    confidence = "stated" if failure else "none"
    implied, why = _implied(ex)
    if failure is None and implied:
        failure, confidence = implied, "inferred"
    if failure is None and err is not None and err.phase == X.KV_ALLOCATION \
            and ex.kv_cache_tokens is None \
            and ((ex.kv_pool_gib or 0) > 0 or (ex.num_gpu_blocks or 0) > 0):
        failure, confidence = F.KV_BELOW_MAX_MODEL_LEN, "inferred"
        why = ("the engine failed right after sizing a positive KV pool, where vLLM checks "
               "that one request of max_model_len fits")
    if failure is None and err is None:
        return _no_failure(ex, c)
    phase = err.phase if err is not None and confidence == "stated" else _failed_phase(failure, ex)
    builder = _BUILDERS.get(failure, _generic)
    cause, fixes, numbers = builder(c, err)
    notes = []
    if confidence == "inferred":
        notes.append(f"Inferred, not stated by vLLM: {why or 'see the numbers above'}.")
    if ex.startups > 1:
        notes.append(f"The log holds {ex.startups} startups; this is the last one.")
    evidence = tuple(dict.fromkeys(([err.message] if err else []) +
                                   [e.message for e in ex.errors]))[:3]
    return Diagnosis("failed", phase, failure, confidence, cause, tuple(fixes), numbers,
                     evidence, tuple(notes), None, ex)


def _failed_phase(failure: str | None, ex: Extracted) -> str:
    return {F.NO_KV_MEMORY: X.KV_ALLOCATION, F.KV_BELOW_MAX_MODEL_LEN: X.KV_ALLOCATION}.get(
        failure, ex.phase)


def _no_failure(ex: Extracted, c: _Ctx) -> Diagnosis:
    if ex.empty:
        return Diagnosis("empty", None, None, "none",
                         f"No vLLM startup lines found ({ex.lines} lines read): this does not "
                         "look like a vLLM log, or it holds only lines vramguard does not use.",
                         extracted=ex)
    summary = _summary(ex)
    if ex.started or ex.phase == X.SERVING:
        notes = _health_notes(ex)
        if ex.startups > 1:
            notes.append(f"The log holds {ex.startups} startups; this is the last one.")
        return Diagnosis("started", X.SERVING, None, "none", _started_text(ex, summary),
                         numbers=summary, notes=tuple(notes), summary=summary, extracted=ex)
    text = (f"The log ends during {X.PHASE_TEXT.get(ex.phase, ex.phase)} without an error line "
            "or a success line: it is cut short, or vLLM is still starting.")
    return Diagnosis("incomplete", ex.phase, None, "none", text, numbers=summary,
                     summary=summary, extracted=ex)


def _summary(ex: Extracted) -> dict:
    keys = ("version", "engine", "model", "weights_gib", "kv_pool_gib", "num_gpu_blocks",
            "kv_cache_tokens", "max_concurrency", "concurrency_tokens_per_request",
            "cuda_graph_gib", "cuda_graph_estimate_gib", "activation_gib", "non_torch_gib")
    d = ex.to_dict()
    return {k: d[k] for k in keys if d.get(k) is not None}


def _started_text(ex: Extracted, s: dict) -> str:
    parts = ["vLLM started"]
    if ex.kv_pool_gib is not None:
        parts.append(f"with a KV pool of {_g(ex.kv_pool_gib)} GiB")
    if ex.kv_cache_tokens is not None:
        parts.append(f"= {ex.kv_cache_tokens:,} tokens")
    elif ex.num_gpu_blocks is not None:
        parts.append(f"= {ex.num_gpu_blocks:,} blocks")
    text = " ".join(parts)
    if ex.max_concurrency is not None and ex.concurrency_tokens_per_request:
        text += (f"; {ex.max_concurrency:g}x concurrency for "
                 f"{ex.concurrency_tokens_per_request:,}-token requests")
    return text + "."


def _health_notes(ex: Extracted) -> list[str]:
    notes = []
    if ex.max_concurrency is not None and ex.max_concurrency < 2:
        notes.append(f"Only {ex.max_concurrency:g} requests of the full max_model_len fit at "
                     "once: long requests will queue or be preempted.")
    st = ex.stats
    if st and st.preemptions:
        notes.append(f"{st.preemptions} preemptions while serving (KV cache full): lower "
                     "--max-num-seqs, or give the KV cache more room.")
    if st and st.max_kv_usage_pct is not None and st.max_kv_usage_pct >= 95:
        notes.append(f"KV cache usage peaked at {st.max_kv_usage_pct:g}%.")
    if ex.cuda_graph_gib and ex.cuda_graph_estimate_gib and \
            ex.cuda_graph_gib > ex.cuda_graph_estimate_gib + 0.25:
        notes.append(f"CUDA graphs took {_g(ex.cuda_graph_gib)} GiB, more than vLLM's "
                     f"{_g(ex.cuda_graph_estimate_gib)} GiB estimate.")
    return notes


# ---- causes and fixes per failure --------------------------------------------------------

def _free_memory(c: _Ctx, err: LogError | None):
    n = dict(err.numbers) if err else {}
    free, total = n.get("free_gib"), n.get("total_gib") or c.total
    util, req = n.get("utilization") or c.util, n.get("requested_gib") or c.requested
    dev = f" on {n['device']}" if n.get("device") else ""
    if err and err.kind == "cpu_kv_memory":
        return (f"The CPU node had only {_g(free)} of {_g(total)} GiB available for a "
                f"{_g(n.get('kv_gib'))} GiB KV cache.",
                [Fix("ask for a smaller KV cache", {"--kv-cache-memory-bytes": "<smaller>"})], n)
    if free is None or total is None:
        return ("Less memory was free at startup than --gpu-memory-utilization asks for.",
                [Fix("lower the utilization, or free the GPU", {"--gpu-memory-utilization": "0.8"})],
                n)
    others = round(total - free, 2)
    cause = (f"Only {_g(free)} of {_g(total)} GiB was free{dev} when vLLM started, but "
             f"--gpu-memory-utilization {_g(util)} asks for {_g(req)} GiB: another process "
             f"(or a vLLM still running) holds about {_g(others)} GiB, counting this "
             "process's own CUDA context.")
    if err and err.kind == "external_weights":
        cause = (f"Weights held outside the engine{dev} take {_g(free)} of {_g(total)} GiB, more "
                 f"than the {_g(req)} GiB budget of --gpu-memory-utilization {_g(util)}.")
    fixes = []
    new_u = _floor2((free - 0.25) / total)
    if 0.05 <= new_u < (util or 1):
        lost = (util - new_u) * total if util else None
        fixes.append(Fix(f"ask for what is free: the KV pool shrinks by about {_g(lost)} GiB",
                         {"--gpu-memory-utilization": f"{new_u:.2f}"}))
    fixes.append(Fix(f"free the {_g(others)} GiB held by other processes (see `nvidia-smi` or "
                     "`vramguard check`) and keep the current flags", {}))
    return cause, fixes, {**n, "held_by_others_gib": others, "utilization_that_fits": new_u}


def _weights_oom(c: _Ctx, err: LogError | None):
    o = err.oom if err else None
    n: dict = {}
    if o:
        n = {k: v for k, v in vars(o).items() if v not in (None, ())}
    w = c.ex.weights_gib
    if o and o.tried_gib is not None and o.free_gib is not None:
        cause = (f"The weights don't fit: loading needed another {_g(o.tried_gib)} GiB but only "
                 f"{_g(o.free_gib)} GiB of {_g(o.total_gib)} was free")
        if o.process_in_use_gib:
            cause += f" (vLLM already held {_g(o.process_in_use_gib)} GiB)"
        cause += "."
    else:
        cause = "The weights don't fit in this GPU's memory (out of memory while loading them)."
    if o and o.other_processes_gib:
        cause += f" Other processes hold {_g(sum(x for x in o.other_processes_gib if x))} GiB."
    fixes = [Fix("split the weights over more GPUs", {"--tensor-parallel-size": str(c.tp * 2)}),
             Fix("load them quantized (FP8 on Ada/Hopper or newer; or a GPTQ/AWQ checkpoint)",
                 {"--quantization": "fp8"})]
    need = (o.tried_gib - o.free_gib) if o and o.tried_gib and o.free_gib is not None else None
    if need is not None:
        fixes.append(Fix("or keep part of the weights in CPU memory (slow)",
                         {"--cpu-offload-gb": str(max(1, math.ceil(need + 1)))}))
    if w:
        n["weights_gib"] = w
    return cause, fixes, n


def _profile_oom(c: _Ctx, err: LogError | None):
    o = err.oom if err else None
    tokens = c.batched_tokens
    cause = ("The profile run (a dummy forward pass of max_num_batched_tokens tokens) ran out of "
             "memory after the weights were loaded")
    if o and o.tried_gib is not None:
        cause += f": it needed another {_g(o.tried_gib)} GiB with {_g(o.free_gib)} GiB free"
    cause += "."
    half = str(max(512, (tokens or 4096) // 2))
    fixes = [Fix("profile (and batch) fewer tokens per step", {"--max-num-batched-tokens": half}),
             Fix("fewer sequences per step", {"--max-num-seqs": str(max(8, (c.max_num_seqs or 256)
                                                                        // 2))}),
             Fix("split the model over more GPUs", {"--tensor-parallel-size": str(c.tp * 2)})]
    return cause, fixes, _oom_numbers(o)


def _no_kv(c: _Ctx, err: LogError | None):
    if err is not None and err.kind == "torch_oom":
        return _kv_allocation_oom(c, err)
    ex = c.ex
    k = ex.kv_pool_gib
    req = c.requested
    w = ex.weights_gib
    n = {"kv_cache_gib": k, "requested_gib": req, "weights_gib": w,
         "activation_gib": ex.activation_gib, "non_torch_gib": ex.non_torch_gib,
         "cuda_graph_estimate_gib": ex.cuda_graph_estimate_gib}
    n = {a: b for a, b in n.items() if b is not None}
    if w is not None and req is not None and w >= req:
        cause = (f"The weights don't fit: they take {_g(w)} GiB, all of the {_g(req)} GiB that "
                 f"--gpu-memory-utilization {_g(c.util)} allows.")
    elif req is not None and k is not None:
        cause = (f"Nothing was left for the KV cache: of the {_g(req)} GiB budget, the weights "
                 f"({_g(w)} GiB) and the profile run's peak took it all ({_g(k)} GiB left).")
    elif k is not None:
        cause = (f"Nothing was left for the KV cache: after the weights ({_g(w)} GiB) and the "
                 f"profile run, vLLM computed {_g(k)} GiB for it.")
    else:
        cause = "Nothing was left for the KV cache after the weights and the profile run."
    fixes = []
    if c.total and c.util and k is not None:
        new_u = _ceil2(c.util + (max(0.0, -k) + 1.0) / c.total)
        if new_u <= 0.97:
            fixes.append(Fix(f"give vLLM {_g((new_u - c.util) * c.total)} GiB more (needs that "
                             "much free)", {"--gpu-memory-utilization": f"{new_u:.2f}"}))
    elif not fixes:
        fixes.append(Fix("give vLLM more of the GPU", {"--gpu-memory-utilization": "0.95"}))
    fixes.append(Fix("split the weights over more GPUs", {"--tensor-parallel-size": str(c.tp * 2)}))
    fixes.append(Fix("a smaller profile run leaves more for the KV cache",
                     {"--max-num-batched-tokens": str(max(512, (c.batched_tokens or 4096) // 2))}))
    if ex.cuda_graph_estimate_gib and (c.version or (0, 0, 0)) >= (0, 20, 0):
        fixes.append(Fix(f"no CUDA graphs frees their {_g(ex.cuda_graph_estimate_gib)} GiB "
                         "estimate (slower decode)", {"--enforce-eager": ""}))
    fixes.append(Fix("or a quantized checkpoint (FP8 / AWQ / GPTQ)", {"--quantization": "fp8"}))
    return cause, fixes, n


def _kv_fit(c: _Ctx, err: LogError | None):
    n = dict(err.numbers) if err else {}
    L = n.get("max_model_len") or c.max_model_len
    need, avail, est = n.get("needed_gib"), n.get("available_gib"), \
        n.get("estimated_max_model_len")
    if err and err.kind == "kv_fit_v0":
        return _kv_fit_v0(c, n)
    if avail is None:
        avail = c.ex.kv_pool_gib
    if need is not None and avail is not None:
        cause = (f"max_model_len {L} needs {_g(need)} GiB of KV cache for one request but only "
                 f"{_g(avail)} GiB was left.")
    else:
        left = f" ({_g(avail)} GiB)" if avail is not None else ""
        cause = (f"One request of max_model_len {L or '?'} does not fit in the KV cache that was "
                 f"left{left}.")
    if est is None and need and avail and L:
        est = int(L * avail / need) // 16 * 16
        n["computed_max_model_len"] = est
    fixes = []
    if est:
        fixes.append(Fix("the longest context that fits (vLLM's estimate)" if
                         n.get("estimated_max_model_len") else "about the longest context that "
                         "fits (computed from the two numbers)", {"--max-model-len": str(est)}))
    if c.version is None or c.version >= (0, 14, 0):
        fixes.append(Fix("let vLLM pick the longest that fits (0.14+)", {"--max-model-len": "auto"}))
    if c.kv_dtype in ("auto", "bfloat16", "float16") and need and avail and need / 2 <= avail:
        fixes.append(Fix("store the KV cache in FP8: half the bytes per token",
                         {"--kv-cache-dtype": "fp8"}))
    if need and avail and c.total and c.util:
        new_u = _ceil2(c.util + (need - avail) / c.total + 0.01)
        if new_u <= 0.97:
            fixes.append(Fix(f"give the KV cache {_g(need - avail)} GiB more (needs that much "
                             "free)", {"--gpu-memory-utilization": f"{new_u:.2f}"}))
    fixes.append(Fix("split over more GPUs (KV per GPU halves)",
                     {"--tensor-parallel-size": str(c.tp * 2)}))
    return cause, fixes, n


def _kv_fit_v0(c: _Ctx, n: dict):
    L, m = n.get("max_model_len"), n.get("max_tokens")
    cause = (f"max_model_len {L} is longer than the {m:,} tokens the KV cache holds: one request "
             "does not fit.")
    fixes = [Fix("the longest context that fits", {"--max-model-len": str(m // 16 * 16)})]
    if m * 2 >= L and c.kv_dtype == "auto":
        fixes.append(Fix("store the KV cache in FP8 (twice the tokens)", {"--kv-cache-dtype": "fp8"}))
    k = c.ex.kv_pool_gib
    if k and m and c.total and c.util:
        extra = (L - m) * k / m
        new_u = _ceil2(c.util + extra / c.total + 0.01)
        n["kv_gib_needed_extra"] = round(extra, 2)
        if new_u <= 0.97:
            fixes.append(Fix(f"give the KV cache {_g(extra)} GiB more",
                             {"--gpu-memory-utilization": f"{new_u:.2f}"}))
    fixes.append(Fix("split over more GPUs", {"--tensor-parallel-size": str(c.tp * 2)}))
    return cause, fixes, n


def _mamba(c: _Ctx, err: LogError | None):
    n = dict(err.numbers) if err else {}
    seqs, blocks = n.get("max_num_seqs") or c.max_num_seqs, n.get("num_blocks")
    cause = (f"Every running request of this hybrid (Mamba / linear-attention) model holds one "
             f"state block, and CUDA graphs are captured for max_num_seqs {seqs}, but the KV "
             f"pool has only {blocks if blocks is not None else 'fewer'} blocks.")
    fixes = []
    if blocks:
        fixes.append(Fix("at most as many sequences as blocks", {"--max-num-seqs": str(blocks)}))
    else:
        fixes.append(Fix("fewer sequences", {"--max-num-seqs": "256"}))
    fixes.append(Fix("or more memory for the pool", {"--gpu-memory-utilization": "0.95"}))
    # NOTE: vLLM checks the blocks for full decode graphs only (config/compilation.py); the
    # block count does not depend on max_model_len.
    fixes.append(Fix("or piecewise CUDA graphs only (slower decode)",
                     {"--compilation-config": '{"cudagraph_mode": "PIECEWISE"}'}))
    return cause, fixes, n


def _distributed(c: _Ctx, err: LogError | None):
    cause = ("A distributed (NCCL / process-group) error stopped the workers; memory was not "
             "the first failure.")
    fixes = [Fix("see what NCCL says", {"env NCCL_DEBUG": "INFO"}),
             Fix("consumer GPUs without P2P over PCIe", {"env NCCL_P2P_DISABLE": "1"}),
             Fix("skip vLLM's custom all-reduce", {"--disable-custom-all-reduce": ""}),
             Fix("in Docker, share the host IPC namespace (NCCL uses /dev/shm)",
                 {"docker": "--ipc=host"})]
    return cause, fixes, {}


def _other(c: _Ctx, err: LogError | None):
    if err is None:
        return _generic(c, err)
    n = dict(err.numbers)
    if err.kind == "shm":
        return _shm(n)
    if err.kind == "spec_config":
        return ("This vLLM refused the speculative-decoding configuration before allocating any "
                "memory: a separate draft LM (method draft_model) runs from 0.15 with \"method\": "
                "\"draft_model\" named (inferred from 0.17); 0.10-0.14 run n-gram, EAGLE, Medusa "
                "and MTP drafters only; up to 0.9.2 the v1 engine falls back to v0 unless "
                "VLLM_USE_V1=1 forces it.",
                [Fix("name the method (0.15-0.16)", {"--speculative-config":
                     '{"method": "draft_model", "model": "<drafter>", '
                     '"num_speculative_tokens": 3}'}),
                 Fix("or an n-gram drafter", {"--speculative-config":
                     '{"method": "ngram", "num_speculative_tokens": 3}'})], n)
    if err.kind == "dcp_config":
        return ("This vLLM refused --decode-context-parallel-size before allocating any memory: "
                "the tensor-parallel size must be divisible by it, the model must have no "
                "sliding-window layers (and, before 0.26, no hybrid layers), and a GQA/MQA model "
                "needs more TP ranks than KV heads to shard over (MLA only before 0.11.2).",
                [Fix("no decode context parallelism", {"--decode-context-parallel-size": "1"})],
                n)
    if err.kind == "swap_space":
        return (f"--swap-space asks for {_g(n.get('swap_gib'))} GiB of the "
                f"{_g(n.get('cpu_gib'))} GiB of CPU memory.",
                [Fix("a smaller CPU swap space", {"--swap-space": "4"})], n)
    if err.kind == "profiling_error":
        return ("Free memory rose while vLLM was profiling: another process on the same GPU "
                "released memory, so vLLM's measurement is wrong.",
                [Fix("run vLLM alone on its GPU (or in its own container)", {})], n)
    if err.kind == "max_model_len_config":
        return (f"--max-model-len {n.get('max_model_len')} is longer than the model's own maximum.",
                [Fix("use the model's maximum (omit the flag)", {"--max-model-len": "<omit>"}),
                 Fix("or override the check (quality may suffer)",
                     {"env VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})], n)
    if err.kind == "block_size":
        size = n.get("block_size") or c.ex.settings.get("block_size") or c.ex.block_size
        return (f"This vLLM does not accept --block-size {size if size is not None else '?'}: "
                "its argument choices or its attention backends (a multiple of 16 on CUDA) "
                "reject it.", [Fix("vLLM's default block size (omit the flag)",
                                   {"--block-size": "<omit>"}),
                               Fix("or a multiple of 16", {"--block-size": "16"})], n)
    return _generic(c, err)


def _shm(n: dict):
    need, free = n.get("required_mib"), n.get("free_mib")
    if need:
        gib = -(-int(need) // 1024)
        return (f"/dev/shm has {free} MiB free but vLLM needs {need} MiB there: from 0.20 the "
                "KV offloading buffer (--kv-offloading-size) is one file in /dev/shm.",
                [Fix("give /dev/shm room for it", {"docker": f"--shm-size={gib + 1}g"}),
                 Fix("or a smaller offloading buffer",
                     {"--kv-offloading-size": str(max(1, int(free or 0) // 1024 - 1))})], n)
    return ("/dev/shm is too small for what vLLM puts there (KV offload buffers, NCCL).",
            [Fix("in Docker, share the host IPC namespace or grow /dev/shm",
                 {"docker": "--ipc=host (or --shm-size=<size>)"})], n)


def _generic(c: _Ctx, err: LogError | None):
    where = X.PHASE_TEXT.get(err.phase if err else c.ex.phase, "startup")
    text = f"vLLM failed during {where}, but the log has no line naming a memory cause"
    if err is not None:
        text += f" (the error: {err.message[:200]!s})"
    return text + ". The root cause is usually the first ERROR line of a worker.", [], {}


_BUILDERS = {
    F.FREE_MEMORY_BELOW_REQUEST: _free_memory, F.WEIGHTS_OOM: _weights_oom,
    F.PROFILE_RUN_OOM: _profile_oom, F.NO_KV_MEMORY: _no_kv,
    F.KV_BELOW_MAX_MODEL_LEN: _kv_fit, F.MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS: _mamba,
    F.CUDA_GRAPH_OOM: _graph_oom, F.SAMPLER_WARMUP_OOM: _sampler, F.RUNTIME_OOM: _runtime_oom,
    F.DISTRIBUTED: _distributed, OTHER: _other,
}
