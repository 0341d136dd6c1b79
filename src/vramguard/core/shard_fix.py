"""The fewest GPUs like this one that hold a model's weights: the plan's fix when the weights
(or the profile run after them) do not fit, computed, not guessed as "twice the TP".

NOTE: `tune` searches these shapes in full; a plan that fails only names the first shape
whose per-GPU weights, with the activation peak and non-torch memory of the failed plan,
fit in what vLLM requests (u x total).
"""

from __future__ import annotations

from dataclasses import replace

from . import _memo
from .gpu import GpuSpec
from .model import ModelSpec
from .plan import Fix
from .provenance import GIB
from .settings import Settings

__all__ = ["shard_shape", "shard_fix"]

# NOTE: one node of 8 GPUs first (tensor parallel), then pipeline stages over nodes.
_MAX_TP = 8
_PP_SIZES = (2, 4, 8)


def _shapes(spec: ModelSpec, s: Settings):
    heads = spec.num_attention_heads or 1
    tps = [t for t in (2, 4, 8) if s.tensor_parallel_size < t <= _MAX_TP and heads % t == 0]
    for tp in tps:
        yield tp, s.pipeline_parallel_size
    top = max([t for t in (1, 2, 4, 8) if heads % t == 0 and t <= _MAX_TP], default=1)
    tp = max(top, s.tensor_parallel_size)
    for pp in _PP_SIZES:
        if s.pipeline_parallel_size < pp <= max(1, spec.num_layers):
            yield tp, pp


def _largest_stage(spec: ModelSpec, s: Settings, gpu: GpuSpec) -> int:
    return max(r.bytes for r in _memo.weights_per_rank(spec, s, gpu.compute_capability))


def shard_shape(spec: ModelSpec, s: Settings, gpu: GpuSpec, budget_bytes: float,
                weights_bytes: int, other_bytes: int) -> tuple[int, int, int] | None:
    """(tp, pp, weights per GPU in bytes) of the first shape, more GPUs than `s` uses, whose
    largest stage's weights plus `other_bytes` fit in `budget_bytes`; None when none up to
    8 x 8 GPUs does. `weights_bytes`: the plan's largest stage (measured, pinned or
    estimated): the other shapes' are scaled by it over the architecture's own figure."""
    derived = _largest_stage(spec, s, gpu)
    scale = weights_bytes / derived if derived > 0 else 1.0
    for tp, pp in _shapes(spec, s):
        shape = replace(s, tensor_parallel_size=tp, pipeline_parallel_size=pp)
        weights = int(_largest_stage(spec, shape, gpu) * scale)
        if weights + other_bytes <= budget_bytes:
            return tp, pp, weights
    return None


def shard_fix(spec: ModelSpec, s: Settings, gpu: GpuSpec, request_bytes: float, stages) -> Fix:
    """The plan's fix for weights that do not fit (`stages`: the failed plan's per-stage
    terms, with `weights`, `activation`, `non_torch` estimates)."""
    shape = shard_shape(spec, s, gpu, request_bytes,
                        max(st.weights.value_bytes for st in stages),
                        max(st.activation.value_bytes + st.non_torch.value_bytes
                            for st in stages))
    if shape is None:
        return Fix("the weights do not fit on 64 GPUs like this one (8 x 8): quantize them or "
                   "use larger GPUs", {})
    tp, pp, weights = shape
    more_pp = pp != s.pipeline_parallel_size
    flags = {"--tensor-parallel-size": str(tp)} | (
        {"--pipeline-parallel-size": str(pp)} if more_pp else {})
    return Fix(f"shard the weights: -tp {tp}{f' -pp {pp}' if more_pp else ''} ({tp * pp} GPUs, "
               f"~{weights / GIB:.1f} GiB of weights each)", flags)
