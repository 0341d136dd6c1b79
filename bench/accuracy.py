"""Accuracy of the planner on real vLLM startups (the corpus schema), next to a naive baseline.

    .venv/bin/python bench/accuracy.py [--cases bench/data/cases.jsonl] [--verbose] [--json]
                                       [--no-free] [--version-default 0.33.0]
                                       [--gpus FILE] [--configs DIR]

Another corpus in the same schema is read from its own folder: `--cases other/cases.jsonl`
takes `other/gpus.jsonl` and `other/configs/<model_config>/config.json` when they exist (then
this project's copies); a model whose config.json is in neither comes from the embedded
catalog by its Hugging Face id (the `model_config` folder name `org__name`, else `model`).

Per case: the settings a user would pass (the case's fields, plus the flags written in
`other_flags`, parsed generically as vLLM flags / `key=value` pairs / a logged args dict),
the GPU (the printed CUDA total, else the catalog), the model (its config.json through
`vramguard.sources.config.spec_from_config`), and the version (pinned; the newest when
unknown). Free memory at startup is the case's measured `free_memory_gib` when the source
printed one (what `vramguard check` would probe); `--no-free` ignores it.

Summary: median and p90 |ΔKV| (GiB) over started cases with a reported `kv_cache_gib`,
outcome accuracy over all cases, the same for the naive baseline
(KV = total × utilization − parameters × dtype bytes / GPUs; starts when one request fits).
No per-case constants: nothing here looks at a case id or a reported answer before predicting.

Also, separately: the KV layout at the reported pool. Where a started case logged both its KV
memory and its block count or KV tokens (and runs without pipeline parallelism), the case is
planned again with the activation term moved so that the pool equals the logged one; the
blocks / tokens vLLM would then print are compared with the logged ones. This checks the
page size, block size and token formulas on their own, apart from the memory terms.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shlex
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from vramguard.core.gpu import GpuSpec  # noqa: E402
from vramguard.core.planner import NEWEST_VERSION, PlanHooks, plan  # noqa: E402
from vramguard.core.settings import Settings  # noqa: E402
from vramguard.errors import VramguardError  # noqa: E402
from vramguard.sources.draft import attach_draft  # noqa: E402

DATA = ROOT / "bench" / "data"
GIB = 1 << 30


# ---- inputs ----------------------------------------------------------------------------

def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def gpu_for(case: dict, gpus: dict[str, dict]) -> GpuSpec | None:
    """The case's GPU: the printed CUDA total, else the corpus GPU list, else the catalog."""
    from vramguard.core.gpu_catalog import lookup_gpu
    name = case.get("gpu_catalog_name")
    cat = None
    if name:
        try:
            cat = lookup_gpu(name)
        except VramguardError:
            cat = None
    total = case.get("gpu_total_gib")
    if total is None and name in gpus and gpus[name].get("total_gib_cuda"):
        total = gpus[name]["total_gib_cuda"]
    if total is None and cat is None:
        # what the user's nvidia-smi says ("97,887 MiB total"), less the driver reservation
        from vramguard.core.gpu_catalog import SMI_RESERVATION_MIB
        m = re.search(r"([\d,]{4,}) MiB", case.get("gpu") or "")
        if m:
            total = (int(m.group(1).replace(",", "")) - SMI_RESERVATION_MIB) / 1024
    if total is None and cat is not None:
        return cat
    if total is None:
        return None
    base = cat or GpuSpec(name=name or "custom", total_bytes=0)
    vendor = base.vendor
    if "rocm" in (case.get("gpu") or "").lower() or "amd" in (case.get("gpu") or "").lower():
        vendor = "amd"
    return replace(base, total_bytes=int(round(total * GIB)), vendor=vendor,
                   name=name or "custom")


_FLAG = re.compile(r"^-{1,2}[A-Za-z][\w-]*(=.*)?$")


def _flag_tokens(text: str) -> list[str]:
    """vLLM-looking flags (and their values) out of free text."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    out: list[str] = []
    i = 0
    while i < len(words):
        # NOTE: prose wraps flags in brackets or backticks: "(--max-loras 1)", "`--enforce-eager`"
        w = words[i].strip("`").lstrip("(").rstrip(";,)`")
        if _FLAG.match(w) and not w.startswith("---"):
            out.append(w)
            nxt = words[i + 1].strip("`").rstrip(";,)") if i + 1 < len(words) else ""
            if "=" not in w and nxt and not nxt.startswith("-") and not nxt.startswith("("):
                out.append(nxt)
                i += 1
        i += 1
    return out


def settings_from_flags(text: str, base: Settings) -> Settings:
    """Apply what a user would have passed, read generically from `other_flags`."""
    from vramguard.sources.vllm_args import parse_vllm_args, settings_from_mapping
    s = base
    for m in re.finditer(r"\{[^{}]*'[^{}]*\}", text or ""):
        try:
            d = ast.literal_eval(m.group(0))
            if isinstance(d, dict):
                s = settings_from_mapping(d, base=s)
        except (ValueError, SyntaxError, VramguardError):
            pass
    pairs = {k: v for k, v in re.findall(r"\b([a-z_]{4,})=([\w.]+)", text or "")
             if k in Settings.__dataclass_fields__}
    if pairs:
        try:
            s = settings_from_mapping(pairs, base=s)
        except VramguardError:
            pass
    toks = _flag_tokens(text or "")
    # one flag at a time, so that one bad value does not drop the rest
    i = 0
    while i < len(toks):
        chunk = [toks[i]]
        if i + 1 < len(toks) and not toks[i + 1].startswith("-"):
            chunk.append(toks[i + 1])
        for attempt in (chunk, chunk[:1]):
            try:
                s = parse_vllm_args(attempt, strict=False, base=s, positional_model=False).settings
                break
            except VramguardError:
                continue
        i += len(chunk)
    # NOTE: a user who sizes LoRA slots (--max-loras / --max-lora-rank) is serving LoRA; the
    # slot buffers are what `--enable-lora` allocates (vllm/lora/models.py LoRAModelManager)
    if (s.max_loras or s.max_lora_rank) and not s.enable_lora:
        s = s.with_(enable_lora=True)
    return s


def config_overrides_from_flags(text: str) -> dict:
    """What `--hf-overrides` / `--rope-scaling` / `--rope-theta` in `other_flags` change in
    config.json (as vLLM applies them, and as `vramguard plan` does for a pasted command)."""
    from vramguard.sources.vllm_args import parse_vllm_args
    toks, out = _flag_tokens(text or ""), {}
    for i, tok in enumerate(toks):
        if tok.split("=")[0] not in ("--hf-overrides", "--rope-scaling", "--rope-theta"):
            continue
        chunk = toks[i:i + 1] if "=" in tok else toks[i:i + 2]
        try:
            cmd = parse_vllm_args(chunk, strict=False, positional_model=False)
        except VramguardError:
            continue
        out.update(cmd.config_overrides)
    return out


def env_from_text(text: str) -> dict[str, str]:
    """`VLLM_*=value` environment assignments written next to the command."""
    return dict(re.findall(r"\b(VLLM_[A-Z0-9_]+)=([\w.:-]+)", text or ""))


def _first_word(text: str | None) -> str | None:
    if not text:
        return None
    w = re.split(r"[\s(+]", text.strip())[0].lower()
    return w or None


def settings_for(case: dict, spec=None) -> Settings:
    """The case's vLLM settings. Its `quantization` names the served checkpoint's method:
    passed as `--quantization` only where the model's config (or `spec_for`'s emulation of
    the checkpoint's) does not declare that method itself (vLLM then reads it there; an
    explicit flag would also keep AWQ / GPTQ off Marlin)."""
    s = settings_from_flags(case.get("other_flags") or "", Settings())
    changes: dict = {}
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization",
                "max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        if case.get(key) is not None:
            changes[key] = case[key]
    if case.get("enforce_eager") is not None:
        changes["enforce_eager"] = bool(case["enforce_eager"])
    dtype = (case.get("dtype") or "").lower()
    if dtype in ("float16", "half", "float32"):
        changes["dtype"] = dtype
    q = _first_word(case.get("quantization"))
    # NOTE: an NVFP4 checkpoint is emulated in `spec_for` (no release since 0.8 takes
    # `--quantization nvfp4`)
    declared = spec is not None and spec.quant is not None and spec.quant.method == q
    if q and q not in ("none", "6-bit", "nvfp4") and not declared:
        changes["quantization"] = q.replace("-", "_") if q == "auto-round" else q
    kvd = _first_word(case.get("kv_cache_dtype"))
    if kvd and kvd != "auto":
        changes["kv_cache_dtype"] = kvd
    return s.with_(**changes) if changes else s


def _config_spec(case: dict, config_dirs):
    """The case's config.json from the first folder that has it, else the embedded catalog;
    with the config overrides its flags carry."""
    from vramguard.sources.config import spec_from_config
    from vramguard.sources.resolve import apply_overrides, load_model_spec
    mc = case.get("model_config")
    overrides = config_overrides_from_flags(case.get("other_flags") or "")
    for folder in (config_dirs or (DATA / "configs",)) if mc else ():
        path = Path(folder) / mc / "config.json"
        if path.exists():
            return spec_from_config(apply_overrides(json.loads(path.read_text()), overrides),
                                    name=mc)
    ids = [mc.replace("__", "/", 1)] if mc and "__" in mc else []
    model = (case.get("model") or "").strip()
    if re.fullmatch(r"[\w.-]+/[\w.-]+", model):
        ids.append(model)
    for model_id in ids:
        try:
            return load_model_spec(model_id, offline=True, config_overrides=overrides)
        except VramguardError:
            continue
    return None


def spec_for(case: dict, config_dirs=None):
    """The model from its config.json (`config_dirs`, in order; else the catalog). When the
    config is the base model's but the case ran a quantized checkpoint whose bit width is
    stated (`gptq (int8)`), the checkpoint's quantization_config is emulated with that width
    (what its own config.json would say)."""
    from vramguard.core.model import QuantSpec
    spec = _config_spec(case, config_dirs)
    if spec is None:
        return None
    qtext = (case.get("quantization") or "").lower()
    bits = re.search(r"\b(?:int|w)(4|8)\b|\b(4|8)-bit\b", qtext)
    if spec.quant is None and bits and _first_word(qtext) in ("gptq", "awq", "compressed-tensors"):
        b = int(bits.group(1) or bits.group(2))
        spec = replace(spec, quant=QuantSpec(method=_first_word(qtext), bits=b,
                                             linear_bytes_per_param=b / 8 + 0.02))
    if spec.quant is None and _first_word(qtext) == "nvfp4":
        # NOTE: the quantization_config a ModelOpt NVFP4 export carries (vLLM reads NVFP4
        # checkpoints by their config; `--quantization nvfp4` is 0.8's name only)
        from vramguard.sources.quant import quant_from_config
        spec = replace(spec, quant=quant_from_config(
            {"quant_method": "modelopt", "quant_algo": "NVFP4"}, where=case["id"]))
    if (spec.quant is None and _first_word(qtext) == "fp8"
            and "fp8" in (case.get("model") or "").lower()):
        # NOTE: the served checkpoint is FP8-serialized (its name says so) where the config is
        # the base model's: emulate its quantization_config, not online `--quantization fp8`
        # (which loads 16-bit weights first)
        from vramguard.sources.quant import quant_from_config
        spec = replace(spec, quant=quant_from_config(
            {"quant_method": "fp8", "activation_scheme": "dynamic"}, where=case["id"]))
    if spec.quant is not None and re.search(r"fp4 experts|expert_dtype fp4", qtext):
        spec = replace(spec, quant=replace(spec.quant, expert_bytes_per_param=0.53125))
    return spec


# ---- the naive baseline ----------------------------------------------------------------

def naive(spec, s: Settings, gpu: GpuSpec, L: int | None) -> tuple[float, bool]:
    """total × u − params × 2 B / GPUs; starts when one max-length request fits."""
    u = s.gpu_memory_utilization or 0.9
    world = s.tensor_parallel_size * s.pipeline_parallel_size
    kv = gpu.total_bytes * u - spec.num_params() * 2 / world
    per_token = spec.kv_bytes_per_token(tp=s.tensor_parallel_size) / s.pipeline_parallel_size
    need = (L or spec.max_len_keys.get("max_position_embeddings") or 2048) * per_token
    return kv / GIB, kv > 0 and kv >= need


# ---- one case ----------------------------------------------------------------------------

def run_case(case: dict, gpus: dict, *, use_free: bool, default_version: str,
             config_dirs=None) -> dict:
    rep = case.get("reported") or {}
    row = {"id": case["id"], "version": case.get("vllm_version_pinned"),
           "reported_kv_gib": rep.get("kv_cache_gib"), "outcome": case["outcome"],
           "predicted_kv_gib": None, "predicted_ok": None, "failure": None, "risks": [],
           "naive_kv_gib": None, "naive_ok": None, "error": None}
    try:
        spec = spec_for(case, config_dirs)
        gpu = gpu_for(case, gpus)
        if spec is None or gpu is None:
            row["error"] = "no model config" if spec is None else "unknown GPU"
            return row
        s = settings_for(case, spec)
        # NOTE: a separate drafter named in the flags, as `vramguard plan` attaches it
        spec, _ = attach_draft(spec, s, offline=True)
        free = None
        if use_free and rep.get("free_memory_gib") is not None:
            free = int(rep["free_memory_gib"] * GIB)
        p = plan(spec, s, gpu, vllm_version=case.get("vllm_version_pinned") or default_version,
                 engine=case.get("engine"), free_bytes=free,
                 env=env_from_text(case.get("other_flags") or ""))
        row["predicted_kv_gib"] = round(reported_rank(case, p).kv_cache.value_bytes / GIB, 3)
        row["predicted_ok"] = p.outcome.ok
        row["failure"] = p.outcome.failure
        row["risks"] = [r.split(":")[0] for r in p.outcome.risks]
        row["engine"] = p.engine
        t = p.tightest
        row["terms_gib"] = {k: round(getattr(t, k).value_bytes / GIB, 2) for k in
                            ("weights", "activation", "non_torch", "cuda_graph")}
        nk, nok = naive(spec, s, gpu, p.settings.get("max_model_len"))
        row["naive_kv_gib"], row["naive_ok"] = round(nk, 3), nok
        if p.kv is not None:
            row["predicted_blocks"], row["predicted_tokens"] = p.kv.num_blocks, p.kv.tokens
        row["layout"] = layout_check(case, spec, s, gpu, p, free)
    except VramguardError as exc:      # vLLM's own validation (a real startup would fail too)
        row["predicted_ok"] = False
        row["failure"] = "usage_error"
        row["error"] = str(exc)[:160]
    return row


_KV_LINE_STAGE = re.compile(r"Worker_PP(\d+)\b[^\n]*Available KV cache memory")


def reported_rank(case: dict, p):
    """The ledger to compare with the case's KV figure: each worker prints its own
    "Available KV cache memory"; where the excerpt names the stage that printed it
    (`Worker_PP1_TP0 …`), that stage's; else the tightest rank (whose value sets the block
    count and every figure vLLM prints after it).

    NOTE: with PP the last stage (LM head, sampler) is the tightest, while the excerpts
    usually show the first worker's line (`Worker_PP0`)."""
    m = _KV_LINE_STAGE.search(case.get("raw_log_excerpt") or "")
    if m is not None:
        stage = int(m.group(1))
        first = next((l for l in p.ledgers if l.pp_rank == stage and l.tp_rank == 0), None)
        if first is not None:
            return first
    w = (case.get("reported") or {}).get("weights_gib")
    stages = {l.pp_rank: l for l in p.ledgers if l.tp_rank == 0}
    if w is not None and len(stages) > 1:
        # NOTE: the KV and weights figures come from one worker's lines: where the excerpt
        # names no stage, the stage whose weights the reported figure matches (the first of
        # equals), not the tightest
        return min(stages.values(), key=lambda l: (abs(l.weights.value_bytes / GIB - w),
                                                   l.pp_rank))
    return p.tightest


def layout_check(case: dict, spec, s: Settings, gpu: GpuSpec, p, free: int | None) -> dict | None:
    """Blocks / tokens at the reported KV pool, next to the logged ones (started cases with
    PP = 1: every rank then has the same layout and a pinned term shifts them all)."""
    rep = case.get("reported") or {}
    kv_gib = rep.get("kv_cache_gib")
    logged = {"num_blocks": rep.get("num_gpu_blocks"), "tokens": rep.get("kv_cache_tokens")}
    if (case["outcome"] != "started" or kv_gib is None or p.kv is None
            or s.pipeline_parallel_size != 1 or not any(logged.values())):
        return None
    t = p.tightest
    # NOTE: a larger predicted pool is moved into the activation term, a smaller one out of
    # the weights (neither move can trip a load or profile check the case passed).
    shift = t.kv_cache.value_bytes - int(kv_gib * GIB)
    hooks = (PlanHooks(activation_bytes=t.activation.value_bytes + shift) if shift >= 0
             else PlanHooks(weights_bytes=t.weights.value_bytes + shift))
    q = plan(spec, s, gpu, vllm_version=case.get("vllm_version_pinned") or NEWEST_VERSION,
             engine=case.get("engine"), free_bytes=free, hooks=hooks,
             env=env_from_text(case.get("other_flags") or ""), detail=False)
    if q.kv is None:
        return None
    out = {}
    for key, value in logged.items():
        if value:
            got = getattr(q.kv, key)
            out[key] = {"logged": value, "predicted": got,
                        "rel_error": round((got - value) / value, 4)}
    return out


def _layout_errors(rows: list[dict]) -> list[float]:
    """|relative error| per case: tokens where logged (what vLLM prints in v1), else blocks."""
    out = []
    for r in rows:
        lay = r.get("layout")
        if lay:
            pick = lay.get("tokens") or lay.get("num_blocks")
            out.append(abs(pick["rel_error"]))
    return sorted(out)


def summarize(rows: list[dict]) -> dict:
    kv_rows = [r for r in rows if r["outcome"] == "started" and r["reported_kv_gib"] is not None
               and r["predicted_kv_gib"] is not None]
    d = sorted(abs(r["predicted_kv_gib"] - r["reported_kv_gib"]) for r in kv_rows)
    dn = sorted(abs(r["naive_kv_gib"] - r["reported_kv_gib"]) for r in kv_rows
                if r["naive_kv_gib"] is not None)

    def pct(xs, q):
        if not xs:
            return None
        k = max(0, min(len(xs) - 1, int(round(q * (len(xs) - 1)))))
        return round(xs[k], 3)

    want = lambda r: r["outcome"] == "started"  # noqa: E731
    right = sum(1 for r in rows if r["predicted_ok"] is not None and r["predicted_ok"] == want(r))
    right_naive = sum(1 for r in rows if r["naive_ok"] is not None and r["naive_ok"] == want(r))
    med, med_n = (round(statistics.median(d), 3) if d else None,
                  round(statistics.median(dn), 3) if dn else None)
    return {"cases": len(rows), "kv_cases": len(kv_rows),
            "kv_cases_over_1_5_gib": sum(1 for x in d if x > 1.5),
            "naive_kv_cases_over_1_5_gib": sum(1 for x in dn if x > 1.5),
            "median_abs_dkv_gib": med, "p90_abs_dkv_gib": pct(d, 0.9),
            "outcome_accuracy": round(right / len(rows), 3) if rows else None,
            "naive_median_abs_dkv_gib": med_n, "naive_p90_abs_dkv_gib": pct(dn, 0.9),
            "naive_outcome_accuracy": round(right_naive / len(rows), 3) if rows else None,
            "median_improvement_x": round(med_n / med, 1) if med and med_n else None,
            "unpredicted": sum(1 for r in rows if r["predicted_ok"] is None),
            **_layout_summary(rows)}


def _layout_summary(rows: list[dict]) -> dict:
    errs = _layout_errors(rows)
    return {"layout_cases": len(errs),
            "layout_median_abs_rel_error": round(statistics.median(errs), 4) if errs else None,
            "layout_max_abs_rel_error": round(errs[-1], 4) if errs else None,
            "layout_cases_over_2pct": sum(1 for e in errs if e > 0.02)}


def _layout_cell(r: dict) -> str:
    lay = r.get("layout")
    if not lay:
        return "     -"
    pick = lay.get("tokens") or lay.get("num_blocks")
    return f"{pick['rel_error'] * 100:+5.1f}%"


def _table(rows: list[dict]) -> str:
    out = [f"{'case':58} {'ver':7} {'rep':>7} {'pred':>7} {'dKV':>6} {'naive':>7} {'layout':>6}"
           "  outcome"]
    for r in rows:
        rep, pr = r["reported_kv_gib"], r["predicted_kv_gib"]
        dkv = f"{pr - rep:+6.2f}" if rep is not None and pr is not None else "     -"
        ok = {True: "start", False: "FAIL", None: "?"}[r["predicted_ok"]]
        actual = "start" if r["outcome"] == "started" else "FAIL"
        mark = "" if r["predicted_ok"] is None or (r["predicted_ok"] == (actual == "start")) \
            else "  <-- wrong"
        extra = r["failure"] or ""
        if r["error"] and r["predicted_ok"] is None:
            extra = r["error"]
        out.append(f"{r['id'][:58]:58} {str(r['version'])[:7]:7} "
                   f"{'-' if rep is None else f'{rep:.2f}':>7} "
                   f"{'-' if pr is None else f'{pr:.2f}':>7} {dkv} "
                   f"{'-' if r['naive_kv_gib'] is None else format(r['naive_kv_gib'], '.2f'):>7} "
                   f"{_layout_cell(r)}  {actual}->{ok} {extra}{mark}")
    return "\n".join(out)


# Issue #3's targets: (summary key, bound, "<=" or ">=", label).
TARGETS = (("median_abs_dkv_gib", 0.3, "<=", "median |dKV| <= 0.3 GiB"),
           ("p90_abs_dkv_gib", 1.5, "<=", "p90 |dKV| <= 1.5 GiB"),
           ("outcome_accuracy", 0.90, ">=", "outcome >= 90%"),
           ("median_improvement_x", 5.0, ">=", "median >= 5x better than naive"))


def targets_line(summary: dict) -> str:
    """Each target with `met` / `NOT met` and the measured value."""
    parts = []
    for key, bound, op, label in TARGETS:
        value = summary.get(key)
        ok = value is not None and (value <= bound if op == "<=" else value >= bound)
        parts.append(f"{label} {'met' if ok else 'NOT met'} ({value})")
    return "targets: " + "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=str(DATA / "cases.jsonl"))
    ap.add_argument("--gpus", default=None,
                    help="GPU list (default: gpus.jsonl next to the cases, else the project's)")
    ap.add_argument("--configs", default=None,
                    help="folder of <model_config>/config.json (default: configs/ next to "
                         "the cases, then the project's; then the embedded catalog)")
    ap.add_argument("--verbose", action="store_true", help="per-case table")
    ap.add_argument("--json", action="store_true", help="rows and summary as JSON")
    ap.add_argument("--no-free", action="store_true",
                    help="ignore the measured free memory some cases carry")
    ap.add_argument("--version-default", default=NEWEST_VERSION,
                    help="version for cases whose version is unknown")
    args = ap.parse_args(argv)
    here = Path(args.cases).resolve().parent
    gpus_file = Path(args.gpus) if args.gpus else next(
        (p for p in (here / "gpus.jsonl", DATA / "gpus.jsonl") if p.exists()), DATA / "gpus.jsonl")
    gpus = {g["short_name"]: g for g in load_jsonl(gpus_file)}
    dirs = [Path(args.configs)] if args.configs else []
    dirs += [d for d in (here / "configs", DATA / "configs") if d.is_dir() and d not in dirs]
    rows = [run_case(c, gpus, use_free=not args.no_free, default_version=args.version_default,
                     config_dirs=dirs) for c in load_jsonl(Path(args.cases))]
    summary = summarize(rows)
    if args.json:
        print(json.dumps({"summary": summary, "cases": rows}, indent=1))
        return 0
    if args.verbose:
        print(_table(rows))
        print()
    s = summary
    print(f"cases: {s['cases']} (KV compared on {s['kv_cases']} started cases; "
          f"{s['unpredicted']} without a model config or GPU)")
    print(f"{'':24}{'vramguard':>12}{'naive':>12}")
    print(f"{'median |dKV| (GiB)':24}{s['median_abs_dkv_gib']!s:>12}"
          f"{s['naive_median_abs_dkv_gib']!s:>12}")
    print(f"{'p90 |dKV| (GiB)':24}{s['p90_abs_dkv_gib']!s:>12}{s['naive_p90_abs_dkv_gib']!s:>12}")
    print(f"{'cases > 1.5 GiB off':24}{s['kv_cases_over_1_5_gib']!s:>12}"
          f"{s['naive_kv_cases_over_1_5_gib']!s:>12}")
    print(f"{'outcome accuracy':24}{s['outcome_accuracy']!s:>12}"
          f"{s['naive_outcome_accuracy']!s:>12}")
    print(f"median improvement over naive: {s['median_improvement_x']}x")
    print(targets_line(s))
    if s["layout_cases"]:
        print(f"KV layout at the logged pool ({s['layout_cases']} started cases with blocks or "
              f"tokens logged, PP=1): median |error| {s['layout_median_abs_rel_error']:.2%}, "
              f"max {s['layout_max_abs_rel_error']:.2%}, {s['layout_cases_over_2pct']} over 2%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
