"""`vramguard model MODEL [--json]` and `vramguard model list [--search TEXT]`.

MODEL is a Hugging Face id (local HF cache, embedded catalog, then the hub unless
`--offline`), a model folder, a config.json or a .gguf file.

JSON output (`--json`, schema "vramguard.model/1"; keys are stable, new keys may be added):

    {"schema": "vramguard.model/1",
     "model": str, "source_ref": str | null, "architecture": str, "model_type": str,
     "spec": {"num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
              "vocab_size", "intermediate_size", "torch_dtype", "tie_word_embeddings",
              "is_encoder_only", "is_hybrid", "uses_mla",
              "attention_kinds": {kind: number of layers},
              "sliding_window_tokens": int | null, "chunk_size_tokens": int | null,
              "moe": {...MoESpec} | null, "vision": {...VisionSpec} | null,
              "quant": {...QuantSpec} | null, "max_len_keys": {key: int},
              "rope_scaling": object | null, "tokenizer_max_length": int | null},
     "params": {"total": int, "active": int, "by_component": {component: int},
                "mtp_not_loaded": int, "checkpoint": int | null,
                "checkpoint_minus_config": int | null},
     "weights": {"bf16_bytes": int, "fp8_bytes": int, "int4_bytes": int,
                 "declared_method": str | null, "declared_bytes": int,
                 "checkpoint": {"format", "total_bytes", "num_tensors", "approximate",
                                "bytes_by_dtype", "path"} | null,
                 "checkpoint_minus_declared_bytes": int | null},
     "kv_cache": {"bytes_per_token": {"auto": int, "bfloat16": int, "fp8": int},
                  "auto_dtype": str, "mamba_state_bytes_per_request": int,
                  "layers_with_kv": int},
     "max_model_len": {"derived": int, "limit": int, "key": str, "key_value": int, "note": str,
                       "vllm_version": str},
     "provenance": {field: "config" | "catalog" | "derived" | "checkpoint" ...},
     "notes": [str]}

Weights are unsharded totals (TP=1, no vocabulary padding): linear and expert weights at
the method's bytes per parameter, embeddings, norms, routers and vision towers at 16 bits.
`model list --json` prints [{"model_id", "aliases", "model_type", "published_params", "source"}].
"""

from __future__ import annotations

from dataclasses import asdict

SCHEMA = "vramguard.model/1"
INT4_G128 = 0.5 + 2 / 128 + 0.5 / 128            # GPTQ/AWQ int4, group 128, with zeros


def add_arguments(parser) -> None:
    parser.add_argument("model", metavar="MODEL",
                        help="Hugging Face id, model folder, config.json or .gguf; or `list`")
    parser.add_argument("--json", action="store_true", help="print JSON (schema in the docs)")
    parser.add_argument("--offline", action="store_true",
                        help="never contact the Hugging Face hub")
    parser.add_argument("--search", metavar="TEXT", help="with `list`: filter ids and aliases")
    parser.add_argument("--vllm-version", metavar="X.Y.Z",
                        help="derive max_model_len as this vLLM release does (default: newest)")


def run(args) -> int:
    """Resolve the model, build the report, render it."""
    if args.model == "list":
        return _list(args)
    if args.search:
        from ..errors import UsageError
        raise UsageError("--search filters the catalog listing", where="--search",
                         fix="Use `vramguard model list --search TEXT`")
    from ..sources.resolve import load_model_spec
    spec = load_model_spec(args.model, offline=args.offline)
    report = build_report(spec, vllm_version=args.vllm_version)
    if args.json:
        from ..render.json_out import print_json
        print_json(report)
    else:
        from ..render.model_text import render_model
        print(render_model(report))
    return 0


def _list(args) -> int:
    from ..sources import catalog
    entries = catalog.search(args.search) if args.search else catalog.list_models()
    rows = [{"model_id": e.model_id, "aliases": list(e.aliases),
             "model_type": _model_type(e.config),
             "published_params": e.published_params, "source": e.source} for e in entries]
    if args.json:
        from ..render.json_out import print_json
        print_json(rows)
    else:
        from ..render.model_text import render_list
        print(render_list(rows, args.search))
    return 0


def _model_type(config: dict) -> str | None:
    for key in ("text_config", "llm_config"):
        sub = config.get(key)
        if isinstance(sub, dict) and isinstance(sub.get("model_type"), str):
            return f"{config.get('model_type')}/{sub['model_type']}"
    mt = config.get("model_type")
    return mt if isinstance(mt, str) else None


# ---- the report (pure) ---------------------------------------------------------------------
def weight_bytes(spec, linear: float, experts: float | None = None,
                 attention: float | None = None, embed: float = 2.0,
                 lm_head: float = 2.0) -> int:
    """Unsharded weight bytes at `linear` bytes/param (experts/attention overrides)."""
    exp_b = experts if experts is not None else linear
    att_b = attention if attention is not None else linear
    total = spec.embed_params * embed + spec.lm_head_params * lm_head
    total += (spec.final_norm_params + spec.extra_params + spec.extra_tp_params) * 2
    total += (spec.vision.num_params if spec.vision else 0) * 2
    for layer in spec.layers:
        p = layer.params
        total += (p.attn_q + p.attn_kv + p.attn_o + p.attn_replicated) * att_b
        total += (p.mlp + p.shared_experts + p.mixer) * linear + p.experts * exp_b
        total += p.router * (4 if p.router_fp32 else 2) + p.norms * 2
    return int(round(total))


def _declared_bytes(spec) -> int:
    q = spec.quant
    if q is None:
        return weight_bytes(spec, 2.0)
    embed = q.linear_bytes_per_param if q.embedding_quantized else 2.0
    head = q.linear_bytes_per_param if q.lm_head_quantized else 2.0
    return weight_bytes(spec, q.linear_bytes_per_param, q.expert_bytes_per_param,
                        q.attention_bytes_per_param, embed, head)


def _kv(spec, rules) -> dict:
    from ..core.kv import kv_dtype_bytes
    from ..core.model import MAMBA, NONE
    from ..core.settings import Settings
    from ..core.weights import runtime_dtype_bytes
    settings = Settings()
    model_b = runtime_dtype_bytes(settings)
    auto_b, auto_name = kv_dtype_bytes(spec, settings, rules, model_b)
    if auto_name == "auto":
        auto_name = "bfloat16" if spec.torch_dtype in ("bfloat16", "bf16") else "float16"
    from ..core.kv import mamba_state_dtype_bytes
    mamba = sum(l.attention.mamba.page_bytes(
                    1, *mamba_state_dtype_bytes(l.attention.mamba, settings, rules, model_b))
                for l in spec.layers
                if l.attention.mamba is not None)
    return {"bytes_per_token": {"auto": spec.kv_bytes_per_token(dtype_bytes=auto_b),
                                "bfloat16": spec.kv_bytes_per_token(dtype_bytes=2),
                                "fp8": spec.kv_bytes_per_token(dtype_bytes=1)},
            "auto_dtype": auto_name, "mamba_state_bytes_per_request": mamba,
            "layers_with_kv": sum(l.attention.cache_layers for l in spec.layers
                                  if l.attention.kind not in (MAMBA, NONE))}


def _max_len(spec, rules, vllm_version: str) -> dict:
    from ..core.maxlen import derive_max_model_len
    d = derive_max_model_len(spec, rules)
    return {"derived": d.value, "limit": d.limit, "key": d.key, "key_value": d.key_value,
            "note": d.note, "vllm_version": vllm_version}


def _spec_facts(spec) -> dict:
    kinds: dict[str, int] = {}
    for layer in spec.layers:
        kinds[layer.attention.kind] = kinds.get(layer.attention.kind, 0) + 1
    windows = [l.attention.sliding_window_tokens for l in spec.layers if l.attention.sliding_window_tokens]
    chunks = [l.attention.chunk_size_tokens for l in spec.layers if l.attention.chunk_size_tokens]
    return {"num_layers": spec.num_layers, "hidden_size": spec.hidden_size,
            "num_attention_heads": spec.num_attention_heads, "num_kv_heads": spec.num_kv_heads,
            "head_dim": spec.head_dim, "vocab_size": spec.vocab_size,
            "intermediate_size": spec.intermediate_size, "torch_dtype": spec.torch_dtype,
            "tie_word_embeddings": spec.tie_word_embeddings,
            "is_encoder_only": spec.is_encoder_only, "is_hybrid": spec.is_hybrid,
            "uses_mla": spec.uses_mla, "attention_kinds": kinds,
            "sliding_window_tokens": max(windows) if windows else None,
            "chunk_size_tokens": max(chunks) if chunks else None,
            "moe": asdict(spec.moe) if spec.moe else None,
            "vision": asdict(spec.vision) if spec.vision else None,
            "quant": asdict(spec.quant) if spec.quant else None,
            "max_len_keys": dict(spec.max_len_keys), "rope_scaling": spec.rope_scaling,
            "tokenizer_max_length": spec.tokenizer_max_length}


def build_report(spec, *, vllm_version: str | None = None) -> dict:
    """Everything `vramguard model` shows, as the documented JSON structure."""
    from ..core.rules import NEWEST_VERSION, resolve_rules
    rules = resolve_rules(vllm_version)
    total = spec.num_params()
    ck = spec.checkpoint
    declared = _declared_bytes(spec)
    checkpoint = None
    if ck is not None:
        checkpoint = {"format": ck.format, "total_bytes": ck.total_bytes,
                      "num_tensors": ck.num_tensors, "approximate": ck.approximate,
                      "bytes_by_dtype": dict(ck.bytes_by_dtype), "path": ck.path}
    return {
        "schema": SCHEMA, "model": spec.name, "source_ref": spec.source_ref,
        "architecture": spec.architecture, "model_type": spec.model_type,
        "spec": _spec_facts(spec),
        "params": {"total": total, "active": spec.num_active_params(),
                   "by_component": spec.params_by_component(), "mtp_not_loaded": spec.mtp_params,
                   "checkpoint": ck.num_params if ck else None,
                   "checkpoint_minus_config": (ck.num_params - total) if ck and ck.num_params else None},
        "weights": {"bf16_bytes": weight_bytes(spec, 2.0), "fp8_bytes": weight_bytes(spec, 1.0),
                    "int4_bytes": weight_bytes(spec, INT4_G128),
                    "declared_method": spec.quant.method if spec.quant else None,
                    "declared_bytes": declared, "checkpoint": checkpoint,
                    "checkpoint_minus_declared_bytes": (ck.total_bytes - declared) if ck else None},
        "kv_cache": _kv(spec, rules),
        "max_model_len": _max_len(spec, rules, vllm_version or NEWEST_VERSION),
        "provenance": {k: getattr(v, "value", str(v)) for k, v in sorted(spec.provenance.items())},
        "notes": list(spec.notes),
    }
