"""Memoized planner terms that do not depend on the flags a search varies.

A tuner plans thousands of candidates of one model that differ only in
`gpu_memory_utilization`, `max_model_len`, `max_num_seqs`, `max_num_batched_tokens` (and a
few discrete flags). The version row, the weights per rank, the KV layout and the derived
maximum length are the same for many of them; these wrappers
compute each once per distinct input and return the stored (immutable) result. `family`
keeps the planner's prefix shared by candidates that differ only in the searched flags
(`SEARCHED`): the row, the checks of the other flags, and the stage terms per (batched
tokens, sequences).

Keys are exactly the inputs that matter:
* the model by identity (`id(spec)`, the spec itself kept alive in the slot, so an id is
  never reused while its entry lives); ModelSpec is frozen and holds dicts, so it cannot be
  hashed by value cheaply;
* Settings by every field except those the wrapped function provably does not read
  (`_NOT_READ_*`; a new Settings field is part of the key by default);
* every other argument as given.

`set_enabled(False)` (or `disabled()`) turns the caches off: tests compare memoized plans
with fresh ones. Results are shared objects: callers must not mutate them (all are frozen
dataclasses, tuples or ints).
"""

from __future__ import annotations

from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import fields
from functools import lru_cache
from operator import attrgetter

from . import kv as _kv
from . import maxlen as _maxlen
from . import rules as _rules
from . import sched as _sched_rules
from . import weights as _weights
from .model import MAMBA, ModelSpec
from .settings import Settings

MAX_SPECS = 16                 # models kept (the oldest evicted first)
MAX_ENTRIES_PER_TABLE = 4096   # per model and table; cleared when full

# Settings fields the wrapped functions never read (anything else is part of the key).
# NOTE: only flags a search varies are left out; tests/core/test_tuner_memo.py varies every
# field and compares with fresh plans, so a wrapped function that starts reading one fails.
SEARCHED = frozenset({"gpu_memory_utilization", "max_model_len", "max_model_len_auto",
                      "max_num_seqs", "max_num_batched_tokens", "kv_cache_memory_bytes",
                      "num_gpu_blocks_override", "user_set", "model"})
# NOTE: the CUDA-graph flags (stage_terms.cudagraph_mode, the capture sizes) feed the graph
# and non-torch terms only (--performance-mode also the scheduler defaults).
_GRAPH_FLAGS = frozenset({"enforce_eager", "optimization_level", "compilation_mode",
                          "cudagraph_mode", "cudagraph_capture_sizes", "cuda_graph_sizes",
                          "max_cudagraph_capture_size", "performance_mode"})
_NOT_READ_WEIGHTS = SEARCHED | _GRAPH_FLAGS | {
    "kv_cache_dtype", "block_size", "disable_sliding_window", "disable_hybrid_kv_cache_manager",
    "num_speculative_tokens", "skip_mm_profiling", "async_scheduling", "mamba_cache_dtype",
    "mamba_ssm_cache_dtype", "mm_ipc_gpu_memory_gb", "flag_spellings"}
# NOTE: the layout's shape reads the KV dtype and the model's dtype only through its
# arguments (the Mamba dtype flags it reads from Settings: in the key), and PP only through
# the in-flight tokens (applied per call).
_NOT_READ_LAYOUT = SEARCHED | _GRAPH_FLAGS | {"cpu_offload_gb", "enable_lora", "max_loras",
                                               "max_lora_rank", "quantization", "dtype",
                                               "kv_cache_dtype", "pipeline_parallel_size",
                                               "language_model_only", "skip_mm_profiling",
                                               "async_scheduling", "mm_ipc_gpu_memory_gb",
                                               "flag_spellings"}

# NOTE: the planner's family (checks, fixed inputs, per-stage terms) never reads the searched
# flags: their checks (`validation.validate_searched`) and `effective.resolve_settings` run
# for every plan; the stage terms get the effective batched tokens and sequences as a key.
_NOT_READ_STAGES = SEARCHED

_ALL_FIELDS = tuple(f.name for f in fields(Settings))
_WEIGHT_FIELDS = tuple(n for n in _ALL_FIELDS if n not in _NOT_READ_WEIGHTS)
_LAYOUT_FIELDS = tuple(n for n in _ALL_FIELDS if n not in _NOT_READ_LAYOUT)
_STAGE_FIELDS = tuple(n for n in _ALL_FIELDS if n not in _NOT_READ_STAGES)
_weight_key = attrgetter(*_WEIGHT_FIELDS)      # C-speed tuple of the fields
_layout_key = attrgetter(*_LAYOUT_FIELDS)
_stage_key = attrgetter(*_STAGE_FIELDS)
_KV_DTYPE_AT = _STAGE_FIELDS.index("kv_cache_dtype")
_MISSING = object()

# NOTE: `Settings()` builds 30 fields and a frozenset; the planner compares against the
# defaults 15 times per plan. Frozen, so one shared instance is safe.
DEFAULT_SETTINGS = Settings()

_enabled = True
_specs: "OrderedDict[int, tuple[ModelSpec, dict[str, dict]]]" = OrderedDict()
_sources: dict = {}               # flag_sources: not per model
# NOTE: the model whose tables `_table` returned last, and those tables (always the ones in
# `_specs`: a model is evicted only when another is added, which then becomes the last).
_last: list = [None, None]
stats = {"misses": 0}             # computations (a call that is not a miss is a hit)


def set_enabled(on: bool) -> None:
    """Turn the caches on or off (off: every call computes afresh)."""
    global _enabled
    _enabled = bool(on)


def is_enabled() -> bool:
    """Whether the caches are on (callers that keep results of their own follow it)."""
    return _enabled


@contextmanager
def disabled():
    """`with disabled(): ...` computes every term afresh (tests)."""
    global _enabled
    before = _enabled
    _enabled = False
    try:
        yield
    finally:
        _enabled = before


def clear() -> None:
    """Forget every stored result."""
    _specs.clear()
    _last[0] = _last[1] = None
    _sources.clear()
    _sched.clear()
    _rules_cached.cache_clear()
    stats["misses"] = 0


def _table(spec: ModelSpec, name: str) -> dict:
    # NOTE: hot path (5 calls per plan): no LRU reordering, oldest model evicted first; the
    # last model's tables are kept at hand (a search plans one model many times).
    if _last[0] is spec:
        tables = _last[1]
    else:
        slot = _specs.get(id(spec))
        if slot is None or slot[0] is not spec:
            slot = (spec, {})
            _specs[id(spec)] = slot
            while len(_specs) > MAX_SPECS:
                _specs.popitem(last=False)
        tables = slot[1]
        _last[0], _last[1] = spec, tables
    table = tables.get(name)
    if table is None or len(table) >= MAX_ENTRIES_PER_TABLE:
        table = tables[name] = {}
    return table


def _lookup(table: dict, key, compute):
    value = table.get(key, _MISSING)
    if value is _MISSING:
        stats["misses"] += 1
        value = table[key] = compute()
    return value


# ---- the wrapped terms (same signatures as the originals) ------------------------------

@lru_cache(maxsize=256)
def _rules_cached(vllm_version, engine):
    return _rules.resolve_rules(vllm_version, engine)


def resolve_rules(vllm_version: str | None = None, engine: str | None = None):
    """`rules.resolve_rules`, cached on (version, engine). Errors are not cached."""
    if not _enabled:
        return _rules.resolve_rules(vllm_version, engine)
    # NOTE: no version is the newest: one entry for both spellings (the tuner asks with
    # None, the planner with the version it defaults to).
    return _rules_cached(vllm_version or _rules.NEWEST_VERSION, engine)


def weights_per_rank(spec: ModelSpec, settings: Settings, compute_capability=None,
                     lora=None, pp_layout=None, vision_every_stage=False, mxfp4=None):
    """`weights.weights_per_rank`, cached per model on the fields it reads."""
    if not _enabled:
        return _weights.weights_per_rank(spec, settings, compute_capability,
                                         lora=lora or _weights.LoraRules(),
                                         pp_layout=pp_layout,
                                         vision_every_stage=vision_every_stage, mxfp4=mxfp4)
    key = (_weight_key(settings), compute_capability, lora, pp_layout, vision_every_stage,
           mxfp4)
    return _lookup(_table(spec, "weights"), key,
                   lambda: _weights.weights_per_rank(spec, settings, compute_capability,
                                                     scale=checkpoint_scale(spec),
                                                     index=layer_index(spec),
                                                     lora=lora or _weights.LoraRules(),
                                                     pp_layout=pp_layout,
                                                     vision_every_stage=vision_every_stage,
                                                     mxfp4=mxfp4))


def checkpoint_scale(spec: ModelSpec) -> tuple[float, bool]:
    """`weights.checkpoint_scale`, once per model."""
    if not _enabled:
        return _weights.checkpoint_scale(spec)
    return _lookup(_table(spec, "ckpt_scale"), None,
                   lambda: _weights.checkpoint_scale(spec, layer_index(spec)))


def layer_index(spec: ModelSpec):
    """`weights.layer_index` (the distinct layers the weights read), once per model."""
    if not _enabled:
        return _weights.layer_index(spec)
    return _lookup(_table(spec, "layer_index"), None, lambda: _weights.layer_index(spec))


def attention_runs(spec: ModelSpec, layer_range):
    """`kv.attention_runs` (the distinct attention specs of a layer range, counted), once
    per model and range."""
    if not _enabled:
        return _kv.attention_runs(spec, layer_range)
    return _lookup(_table(spec, "attention_runs"), tuple(layer_range),
                   lambda: _kv.attention_runs(spec, layer_range))


def _lookup_by_id(table: dict, obj, key, compute):
    """Like `_lookup` with `obj` in the key by identity (hashing a VllmRules row or a GpuSpec
    hashes every field): the object is stored with the value and checked on a hit."""
    full = (id(obj), key)
    hit = table.get(full)
    if hit is not None and hit[0] is obj:
        return hit[1]
    stats["misses"] += 1
    value = compute()
    table[full] = (obj, value)
    return value


def build_layout(spec: ModelSpec, settings: Settings, rules, layer_range, *,
                 max_num_batched_tokens: int, async_scheduling: bool = False,
                 v2_runner: bool = False, **kw):
    """`kv.build_layout`: its shape (`kv.layout_shape`) cached per model on the fields it
    reads and every other argument; the in-flight tokens set per call.

    NOTE: the batched tokens only feed the in-flight tokens `I`, which a search varies per
    candidate: the shape is computed once, `I` applied to it (`kv.with_inflight`)."""
    if not _enabled:
        return _kv.build_layout(spec, settings, rules, layer_range,
                                max_num_batched_tokens=max_num_batched_tokens,
                                async_scheduling=async_scheduling, v2_runner=v2_runner, **kw)
    return _kv.with_inflight(layout_shape(spec, settings, rules, layer_range, **kw),
                             _kv.inflight_tokens(rules, settings, max_num_batched_tokens,
                                                 async_scheduling, v2_runner))


def layout_shape(spec: ModelSpec, settings: Settings, rules, layer_range, *, kv_bytes: int,
                 mamba_bytes: int, block_size: int, engine: str, kernel_alignment: int = 16,
                 kv_dtype_name: str = "auto", mamba_mode: str = "none",
                 mla_align_elems: int = 0, mamba_ckpt: frozenset = frozenset()):
    """`kv.layout_shape`, cached per model on the fields it reads and every argument."""
    if not _enabled:
        return _kv.layout_shape(spec, settings, rules, layer_range, kv_bytes=kv_bytes,
                                mamba_bytes=mamba_bytes, block_size=block_size, engine=engine,
                                kernel_alignment=kernel_alignment, kv_dtype_name=kv_dtype_name,
                                mamba_mode=mamba_mode, mla_align_elems=mla_align_elems,
                                mamba_ckpt=mamba_ckpt)
    # NOTE: the arguments by position (sorting keyword items per lookup cost more than
    # hashing them); the runs are a function of the model and the range (both in the key).
    key = (_layout_key(settings), tuple(layer_range), kv_bytes, mamba_bytes, block_size, engine,
           kernel_alignment, kv_dtype_name, mamba_mode, mla_align_elems, mamba_ckpt)
    return _lookup_by_id(_table(spec, "layout"), rules, key,
                         lambda: _kv.layout_shape(spec, settings, rules, layer_range,
                                                  runs=attention_runs(spec, layer_range),
                                                  kv_bytes=kv_bytes, mamba_bytes=mamba_bytes,
                                                  block_size=block_size, engine=engine,
                                                  kernel_alignment=kernel_alignment,
                                                  kv_dtype_name=kv_dtype_name,
                                                  mamba_mode=mamba_mode,
                                                  mla_align_elems=mla_align_elems,
                                                  mamba_ckpt=mamba_ckpt))


def resolve_max_model_len(spec: ModelSpec, rules, user_len, *, disable_sliding_window=False,
                          sliding_window=None):
    """`maxlen.resolve_max_model_len` with the derived length cached; the user's length is
    checked on every call (a UsageError is raised afresh)."""
    # NOTE: the derived length does not depend on the user's: derived once per model, row and
    # window; the user's length is checked against it on every call (cheap; raises afresh).
    d = derived_max_model_len(spec, rules, disable_sliding_window, sliding_window)
    return _maxlen.apply_user_len(spec, d, user_len, rules)


def derived_max_model_len(spec: ModelSpec, rules, disable_sliding_window: bool = False,
                          sliding_window: int | None = None):
    """`maxlen.derive_max_model_len`, cached per model, row and window."""
    if not _enabled:
        return _maxlen.derive_max_model_len(spec, rules,
                                            disable_sliding_window=disable_sliding_window,
                                            sliding_window=sliding_window)
    return _lookup_by_id(_table(spec, "maxlen"), rules, (disable_sliding_window, sliding_window),
                         lambda: _maxlen.derive_max_model_len(
                             spec, rules, disable_sliding_window=disable_sliding_window,
                             sliding_window=sliding_window))


def sliding_window(spec: ModelSpec) -> int | None:
    """The first sliding window of the model's layers (a per-model constant)."""
    if not _enabled:
        return _first_window(spec)
    return _lookup(_table(spec, "window"), None, lambda: _first_window(spec))


def has_mamba(spec: ModelSpec) -> bool:
    """Whether any layer is Mamba / linear attention (a per-model constant)."""
    if not _enabled:
        return MAMBA in spec.attention_kinds()
    return _lookup(_table(spec, "has_mamba"), None, lambda: MAMBA in spec.attention_kinds())


def mamba_kinds(spec: ModelSpec) -> frozenset:
    """The recurrent-state kinds of the model's layers (a per-model constant)."""
    def kinds():
        return frozenset(l.attention.mamba.kind for l in spec.layers
                         if l.attention.mamba is not None)
    if not _enabled:
        return kinds()
    return _lookup(_table(spec, "mamba_kinds"), None, kinds)


def _first_window(spec: ModelSpec) -> int | None:
    return next((l.attention.sliding_window_tokens for l in spec.layers
                 if l.attention.sliding_window_tokens), None)


def flag_sources(values: tuple, user_set: frozenset, compute, names: frozenset | None = None):
    """Where the flags the planner takes as given came from (`compute()`), cached on
    `user_set` when it is not empty (a flag is the user's exactly when it is in it; with
    `names`, the flags compute reads, only on those of them in it), else on the values (a
    flag is the user's when it differs from vLLM's default). The value is shared: callers
    copy it before changing it."""
    if not _enabled:
        return compute()
    if len(_sources) >= MAX_ENTRIES_PER_TABLE:
        _sources.clear()
    # NOTE: keyed on the values only without user_set: a search gives every candidate its own
    # values (utilization, lengths) but few distinct user_sets, fewer still among the flags.
    if user_set:
        key = (True, user_set & names if names is not None else user_set)
    else:
        key = (False, values)
    return _lookup(_sources, key, compute)


def family(spec: ModelSpec, settings: Settings, gpu, version: str, engine, env, build):
    """The planner's prefix shared by the candidates of one family (`family.Family`, made
    by `build(shared)`): cached per model on the Settings fields outside `SEARCHED`, the
    release, the engine asked for, the GPU (by identity, kept with the value) and the
    environment. `shared`: a dict the families that differ only in the KV-cache dtype share
    (`family._family`, `family_terms`); None with the caches off.

    NOTE: a search plans many candidates that differ only in the searched flags; the version
    row, the checks of the other flags, the settings' fixed inputs and the stage terms are
    theirs in common. The family is mutable (it fills in as the walk goes): only the planner
    writes to it. A search also tries each family with an fp8 KV cache: most of its terms
    do not read the KV dtype (`stage_terms.runtime_fixed`, `runtime_base`)."""
    if not _enabled:
        return build(None)
    env_key = tuple(sorted(env.items())) if env else None
    stage = _stage_key(settings)
    # NOTE: `_lookup_by_id` spelled out: the key (a long tuple, hashed per dict operation)
    # is looked up once and stored once.
    full = (id(gpu), (version, engine, env_key, stage))
    table = _table(spec, "family")
    hit = table.get(full)
    if hit is not None and hit[0] is gpu:
        return hit[1]
    stats["misses"] += 1
    # NOTE: the stage key without the KV dtype (sliced: the tuple is built once)
    sibling = (version, engine, env_key, stage[:_KV_DTYPE_AT] + stage[_KV_DTYPE_AT + 1:])
    shared = _lookup_by_id(_table(spec, "kv_siblings"), gpu, sibling, dict)
    value = build(shared)
    table[full] = (gpu, value)
    return value


def family_terms(cache: dict, shared: dict | None, spec: ModelSpec, settings: Settings, rules,
                 gpu, device: str, tokens: int, seqs: int, terms):
    """The planner's per-stage terms of one family, in its `cache`: `fixed_terms` once (they
    depend on neither the batched tokens nor the sequences), then `base_terms` per (tokens,
    seqs). `terms`: stage_terms' (runtime_fixed, fixed_terms, runtime_base, base_terms); the
    parts that do not read the KV-cache dtype (`runtime_*`) are kept in `shared` (the
    family's `_memo.family` siblings; None: not shared)."""
    runtime_fixed, fixed_terms, runtime_base, base_terms = terms
    fixed = cache.get(None)
    if fixed is None:
        stats["misses"] += 1
        rt = shared.get(None) if shared is not None else None
        if rt is None:
            rt = runtime_fixed(spec, settings, rules, gpu, device)
            if shared is not None:
                shared[None] = rt
        fixed = cache[None] = fixed_terms(spec, settings, rules, gpu, device, rt)
    key = (tokens, seqs)
    value = cache.get(key)
    if value is None:
        stats["misses"] += 1
        if len(cache) >= MAX_ENTRIES_PER_TABLE:
            cache.clear()
            cache[None] = fixed
        rt = shared.get(key) if shared is not None else None
        if rt is None:
            rt = runtime_base(spec, settings, rules, tokens, seqs, fixed)
            if shared is not None:
                if len(shared) >= MAX_ENTRIES_PER_TABLE:
                    keep = {k: shared[k] for k in _SHARED_KEEP if k in shared}
                    shared.clear()
                    shared.update(keep)
                shared[key] = rt
        value = cache[key] = base_terms(spec, settings, rules, tokens, seqs, fixed, rt)
    return value


# NOTE: what a family's `shared` dict keeps when its per-(tokens, seqs) entries are cleared
# (the runtime fixed terms, the planner's version row, settings base and checks' pass).
_SHARED_KEEP = (None, "core", "base", "checked")


_sched: dict = {}                 # scheduler_defaults: not per model


def scheduler_defaults(rules, gpu_name: str, total_gib: float, *, entrypoint: str = "serve",
                       device: str = "cuda", world_size: int = 1) -> tuple[int, int]:
    """`sched.scheduler_defaults`, cached on every argument (the row by identity)."""
    if not _enabled:
        return _sched_rules.scheduler_defaults(rules, gpu_name, total_gib,
                                               entrypoint=entrypoint, device=device,
                                               world_size=world_size)
    if len(_sched) >= MAX_ENTRIES_PER_TABLE:
        _sched.clear()
    return _lookup_by_id(_sched, rules, (gpu_name, total_gib, entrypoint, device, world_size),
                         lambda: _sched_rules.scheduler_defaults(
                             rules, gpu_name, total_gib, entrypoint=entrypoint, device=device,
                             world_size=world_size))
