"""A parsed log next to vramguard's own plan for the same settings.

Adapters only: the log's model id, its settings (non-default args + engine config) and the
GPU (from `--gpu`, or the catalog GPU whose CUDA total matches the log's) are turned into
`load_model_spec` / `settings_from_mapping` / `lookup_gpu` inputs, and `core.planner.plan`
does the rest. Every step degrades to a reason string instead of raising.
"""

from __future__ import annotations

from ..core.provenance import GIB
from .extracted import Extracted
from .versions import normalize_version

_TOTAL_TOLERANCE_GIB = 0.03


def gpu_for_log(ex: Extracted, name: str | None = None):
    """(GpuSpec | None, reason). `name` wins; then a GPU the log names; else the one
    catalog GPU whose CUDA total matches the log's."""
    from ..core.gpu_catalog import list_gpus, lookup_gpu
    from ..errors import VramguardError
    if name:
        try:
            return lookup_gpu(name), None
        except VramguardError as exc:
            return None, exc.line()
    if ex.gpu_name:
        try:
            return lookup_gpu(ex.gpu_name), None
        except VramguardError:
            pass
    total = _log_total(ex)
    if total is None:
        return None, "the log does not show the GPU's total memory: pass --gpu"
    hits = [g for g in list_gpus()
            if g.vendor != "cpu" and abs(g.total_bytes / GIB - total) <= _TOTAL_TOLERANCE_GIB]
    names = sorted({g.name for g in hits})
    if len(names) == 1:
        return hits[0], None
    if not names:
        return None, f"no catalog GPU has {total} GiB: pass --gpu"
    return None, f"{total} GiB matches {', '.join(names)}: pass --gpu"


def _log_total(ex: Extracted) -> float | None:
    if ex.total_gpu_gib:
        return ex.total_gpu_gib
    for err in ex.errors:
        if err.numbers.get("total_gib"):
            return err.numbers["total_gib"]
        if err.oom and err.oom.total_gib:
            return err.oom.total_gib
    return None


def settings_for_log(ex: Extracted):
    """(Settings, reason | None) from the log's engine config and non-default args."""
    from ..core.settings import Settings
    from ..errors import VramguardError
    from ..sources.vllm_args import settings_from_mapping
    mapping = {k: v for k, v in ex.settings.items() if v is not None}
    if isinstance(mapping.get("dtype"), str):
        mapping["dtype"] = mapping["dtype"].replace("torch.", "")
    try:
        return settings_from_mapping(mapping), None
    except VramguardError as exc:
        first = exc.line()
    except Exception as exc:          # NOTE: foreign data; never let it stop a diagnosis
        return Settings(), f"the logged settings were not understood ({exc})"
    # NOTE: one value vramguard cannot read (e.g. a JSON flag cut by a loosely split command
    # line) must not drop the others: keep every key that reads on its own.
    settings, dropped = Settings(), []
    for key, value in mapping.items():
        try:
            settings = settings_from_mapping({key: value}, base=settings)
        except Exception:             # NOTE: a VramguardError, or foreign data as above
            dropped.append(key)
    return settings, (f"some logged settings were not understood ({first}); used the others, "
                      f"not {', '.join(dropped)}")


def model_for_log(ex: Extracted, ref: str | None = None):
    """(ModelSpec | None, reason). Offline only: cache, catalog, local path."""
    from ..errors import VramguardError
    from ..sources.resolve import load_model_spec
    ref = ref or ex.model
    if not ref:
        return None, "the log does not name the model: pass --model"
    try:
        return load_model_spec(ref, offline=True), None
    except VramguardError as exc:
        return None, f"cannot load {ref} offline ({exc.line()})"
    except Exception as exc:
        return None, f"cannot load {ref} offline ({exc})"


def plan_for_log(ex: Extracted, *, gpu: str | None = None, model: str | None = None,
                 calibration=None):
    """(Plan | None, note | None): vramguard's plan for the log's own settings. Without a
    plan the note says why; with one it names an assumption (an unknown vLLM version)."""
    from ..core.planner import plan
    from ..errors import VramguardError
    spec, why = model_for_log(ex, model)
    if spec is None:
        return None, why
    gspec, why = gpu_for_log(ex, gpu)
    if gspec is None:
        return None, why
    settings, _ = settings_for_log(ex)
    from ..sources.draft import attach_draft
    spec, _ = attach_draft(spec, settings, offline=True)     # NOTE: a drafter the log names
    free = int(ex.free_at_start_gib * GIB) if ex.free_at_start_gib else None
    version = normalize_version(ex.version)
    note = None if version else "the log does not print the vLLM version: planned for the newest"
    if version is None:
        from ..core.argparse_checks import last_release_with_flags
        version = last_release_with_flags(settings)
        if version is not None:
            note = ("the log does not print the vLLM version: planned for the newest release "
                    f"that has its flags ({version})")
    try:
        return plan(spec, settings, gspec, vllm_version=version, engine=ex.engine,
                    free_bytes=free, calibration=calibration), note
    except VramguardError as exc:
        return None, f"vramguard cannot plan these settings: {exc.line()}"
    except Exception as exc:
        return None, f"vramguard cannot plan these settings: {exc}"


def side_by_side(ex: Extracted, p) -> list[tuple[str, object, object]]:
    """Rows (what, the log's value, the plan's value) for the terms both can state."""
    t = p.tightest
    kv = p.kv

    def gib(n):
        return round(n / GIB, 2) if n is not None else None
    rows = [
        ("weights GiB", ex.weights_gib, gib(t.weights.value_bytes)),
        ("activation GiB", ex.activation_gib, gib(t.activation.value_bytes)),
        ("non-torch GiB", ex.non_torch_gib, gib(t.non_torch.value_bytes)),
        ("CUDA graphs GiB", ex.cuda_graph_estimate_gib or ex.cuda_graph_gib,
         gib(t.cuda_graph.value_bytes)),
        ("KV pool GiB", ex.kv_pool_gib, gib(t.kv_cache.value_bytes)),
        ("KV tokens", ex.kv_cache_tokens, kv.tokens if kv else None),
        ("blocks", ex.num_gpu_blocks, kv.num_blocks if kv else None),
        ("max concurrency", ex.max_concurrency, round(kv.max_concurrency, 2) if kv else None),
        ("startup", "failed" if ex.errors else ("started" if ex.started else "?"),
         "ok" if p.outcome.ok else p.outcome.failure),
    ]
    return [r for r in rows if r[1] is not None or r[2] is not None]
