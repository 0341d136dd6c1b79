"""The cause and fixes of the out-of-memory failures `diagnose` names (raw torch OOMs by
phase: KV allocation, CUDA-graph capture, sampler warm-up, serving), and the number
formatting every builder shares. Split out of `diagnose`; pure, like it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..core.plan import Fix
from .extracted import LogError

if TYPE_CHECKING:
    from .diagnose import _Ctx


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f}".rstrip("0").rstrip(".") if abs(x) < 1000 else f"{x:,.0f}"


def _floor2(x: float) -> float:
    return math.floor(x * 100 + 1e-9) / 100


def _ceil2(x: float) -> float:
    return math.ceil(x * 100 - 1e-9) / 100


def _oom_numbers(o) -> dict:
    return {k: v for k, v in vars(o).items() if v not in (None, ())} if o else {}


def _kv_allocation_oom(c: _Ctx, err: LogError):
    """torch's OOM while allocating the KV pool vLLM had sized: memory taken since vLLM
    measured (another process), or a pool forced by --kv-cache-memory-bytes /
    --num-gpu-blocks-override."""
    o, s = err.oom, c.ex.settings
    cause = f"Allocating the KV cache ran out of memory ({err.numbers.get('frame')})"
    if o and o.tried_gib is not None:
        cause += f": a {_g(o.tried_gib)} GiB tensor with {_g(o.free_gib)} GiB free"
    forced = [f for f in ("kv_cache_memory_bytes", "num_gpu_blocks_override") if s.get(f)]
    cause += (". The pool was forced by --" + " and --".join(f.replace("_", "-") for f in forced)
              if forced else ". Something else took GPU memory after vLLM measured it "
              "(another process on a shared GPU), or the KV budget was too close to the limit")
    fixes = [Fix(f"a smaller forced pool, or vLLM's own sizing (drop --{f.replace('_', '-')})",
                 {"--" + f.replace("_", "-"): "<lower>"}) for f in forced]
    if c.util and c.total and "kv_cache_memory_bytes" not in forced:
        # NOTE: a pool forced in bytes ignores the utilization: no budget fix then.
        lack = max(0.0, (o.tried_gib or 0) - (o.free_gib or 0)) if o else 0.0
        fixes.append(Fix("a smaller budget", {"--gpu-memory-utilization":
                                              f"{_floor2(c.util - (lack + 0.5) / c.total):.2f}"}))
    fixes.append(Fix("run vLLM alone on its GPU (`vramguard check` names the other processes)", {}))
    return cause + ".", fixes, _oom_numbers(o)


def _graph_oom(c: _Ctx, err: LogError | None):
    o = err.oom if err else None
    ex = c.ex
    g = ex.cuda_graph_estimate_gib or ex.cuda_graph_gib
    budgeted = c.version is None or c.version >= (0, 20, 0)
    cause = "Capturing CUDA graphs ran out of memory after the KV cache was allocated"
    if o and o.tried_gib is not None:
        cause += f" (needed {_g(o.tried_gib)} GiB more, {_g(o.free_gib)} GiB free)"
    cause += "."
    if not budgeted:
        cause += (" Before vLLM 0.20 the graphs are not in the budget: they must fit in the "
                  "(1 - gpu_memory_utilization) headroom.")
    elif c.version is None:
        cause += (" (Before vLLM 0.20 the graphs must fit outside the --gpu-memory-utilization "
                  "budget.)")
    fixes = [Fix("no CUDA graphs (slower decode, no capture memory)", {"--enforce-eager": ""})]
    if c.util and c.total:
        new_u = _floor2(c.util - ((g or 1.0) + 0.5) / c.total)
        fixes.append(Fix("leave room for the graphs outside the budget",
                         {"--gpu-memory-utilization": f"{new_u:.2f}"}))
    fixes.append(Fix("fewer / smaller graphs to capture",
                     {"--max-num-seqs": str(max(8, (c.max_num_seqs or 256) // 2))}))
    if c.version is not None and c.version >= (0, 11, 1):
        fixes.append(Fix("or cap the captured batch (V1 0.11.1+), keeping max_num_seqs",
                         {"--max-cudagraph-capture-size": "128"}))
    n = _oom_numbers(o)
    if g:
        n["cuda_graph_gib"] = g
    return cause, fixes, n


def _sampler(c: _Ctx, err: LogError | None):
    n = dict(err.numbers) if err else {}
    oom = next((e.oom for e in c.ex.errors if e.kind == "torch_oom" and e.oom), None)
    n.update(_oom_numbers(oom))
    reqs = n.get("num_requests") or c.max_num_seqs
    cause = (f"The sampler warm-up with {reqs or 'max_num_seqs'} dummy requests ran out of "
             "memory after the KV cache and the CUDA graphs had taken theirs.")
    fixes = [Fix("fewer sequences per step", {"--max-num-seqs": str(max(8, (reqs or 256) // 2))})]
    if c.util and c.total:
        tried = n.get("tried_gib") or 0.5
        fixes.append(Fix("leave the sampler room outside the KV budget",
                         {"--gpu-memory-utilization": f"{_floor2(c.util - (tried + 0.5) / c.total):.2f}"}))
    return cause, fixes, n


def _runtime_oom(c: _Ctx, err: LogError | None):
    o = err.oom if err else None
    cause = "vLLM ran out of memory while serving (after a successful startup)"
    if o and o.tried_gib is not None:
        cause += f": it needed {_g(o.tried_gib)} GiB more with {_g(o.free_gib)} GiB free"
    cause += "."
    fixes = []
    if c.util:
        fixes.append(Fix("leave more headroom outside the KV budget",
                         {"--gpu-memory-utilization": f"{max(0.5, c.util - 0.05):.2f}"}))
    fixes.append(Fix("fewer sequences per step",
                     {"--max-num-seqs": str(max(8, (c.max_num_seqs or 256) // 2))}))
    if o and (o.reserved_unallocated_gib or 0) >= 1:
        fixes.append(Fix(f"{_g(o.reserved_unallocated_gib)} GiB is reserved but unallocated: "
                         "fragmentation", {"env PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}))
    return cause, fixes, _oom_numbers(o)
