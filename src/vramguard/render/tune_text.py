"""Rendering of a TuneResult: the ranked options table, the recommended `vllm serve` command,
its `--config` YAML, the JSON contract, and the max_model_len ↔ concurrency chart.

Takes results, never computes memory: every number is a field of an Option / Plan. The
command line is written by `sources.vllm_args` (`settings_to_args` + `format_command`), so
it parses back to the same Settings.

JSON contract (docs/tune.md):
    {"recommended": {"command", "settings", "config_yaml", "plan": Plan.to_dict()} | null,
     "options": [{"rank", "command", "settings", "starts", "meets_target", ...}],
     "reason": str | null, ...}
"""

from __future__ import annotations

import json
import re

from ..core.provenance import GIB
from ..core.tuner import LIMIT_PINNED, LIMIT_TARGET, LIMIT_VLLM, Option, TuneResult, headroom_gib

_SKIP = ("model", "max_model_len_auto", "entrypoint", "user_set")
_NO_POOL = ("weights_oom", "profile_run_oom", "free_memory_below_request")   # before the KV pool


def command_args(opt: Option, extra: tuple[str, ...] = ()) -> list[str]:
    """The option's flags as vLLM argv (model excluded), then `extra`: the launch's flags
    that do not change memory, as given (`VllmCommand.passthrough`)."""
    from ..sources.vllm_args import settings_to_args
    return settings_to_args(opt.settings, version=opt.plan.vllm_version) + list(extra)


def command_for(opt: Option, model: str, extra: tuple[str, ...] = (),
                env: tuple[str, ...] = ()) -> str:
    """A copy-pasteable `vllm serve MODEL --flag ...` line (`env`: `launch_env` words)."""
    from ..sources.vllm_args import format_command
    return format_command(model, command_args(opt, extra), env=env)


def launch_env(result: TuneResult) -> tuple[str, ...]:
    """The launch's vLLM variables as `VAR=value` words: the recommendation was planned with
    them, so its command carries them."""
    return tuple(f"{k}={v}" for k, v in result.request.env if k.startswith("VLLM_"))


def settings_for(opt: Option) -> dict:
    """The flags on the command line, by Settings field name."""
    s = opt.settings
    return {name: getattr(s, name) for name in sorted(s.user_set) if name not in _SKIP}


def config_yaml(opt: Option, model: str, extra: tuple[str, ...] = (),
                env: tuple[str, ...] = ()) -> str:
    """The same flags as a vLLM `--config` YAML (`vllm serve MODEL --config FILE`)."""
    args = command_args(opt, extra)
    run = " ".join(env + ("vllm", "serve"))
    lines = [f"# {run} {model} --config this.yaml", f"model: {_yaml_scalar(model)}"]
    i = 0
    while i < len(args):
        key = args[i].lstrip("-")
        j = i + 1
        while j < len(args) and not _FLAG_TOKEN.match(args[j]):
            j += 1              # NOTE: flags such as --cudagraph-capture-sizes take several
        values = args[i + 1:j]
        if key == "O":
            # NOTE: `-O N` has no YAML key of its own; it is only written for 0.12+, where
            # it is --optimization-level (before, the level goes in the compilation config).
            key = "optimization-level"
        if len(values) > 1:
            lines.append(f"{key}: [{', '.join(_yaml_scalar(v) for v in values)}]")
        elif values:
            lines.append(f"{key}: {_yaml_scalar(values[0])}")
        else:
            lines.append(f"{key}: true" if not key.startswith("no-") else f"{key[3:]}: false")
        i = j
    return "\n".join(lines) + "\n"


_FLAG_TOKEN = re.compile(r"-{1,2}[A-Za-z]")      # not a value such as -1


def _yaml_scalar(text: str) -> str:
    try:
        float(text)
        return text
    except ValueError:
        pass
    if text.replace("-", "").replace("_", "").replace("/", "").replace(".", "").isalnum():
        return text if text.lower() not in ("true", "false", "null", "yes", "no", "on", "off") \
            else json.dumps(text)
    return json.dumps(text)


def option_dict(opt: Option, model: str, rank: int, extra: tuple[str, ...] = (),
                env: tuple[str, ...] = ()) -> dict:
    """One row of `options` in the JSON contract."""
    p = opt.plan
    t = p.tightest
    return {
        "rank": rank,
        "command": command_for(opt, model, extra, env),
        "settings": settings_for(opt),
        "starts": opt.starts,
        "meets_target": opt.meets_target,
        "failure": p.outcome.failure,
        "risks": list(p.outcome.risks),
        "gpus_needed": opt.gpus_needed,
        "needs_more_gpus": opt.needs_more_gpus,
        "gpu": opt.gpu.spec.name,
        "tensor_parallel_size": opt.settings.tensor_parallel_size,
        "pipeline_parallel_size": opt.settings.pipeline_parallel_size,
        "max_model_len": opt.max_model_len,
        "max_num_seqs": opt.max_num_seqs,
        "max_num_seqs_limit": opt.limit,
        "concurrency_at_target": opt.supported_concurrency,
        "max_concurrency": round(p.kv.max_concurrency, 4) if p.kv else None,
        "kv_cache_bytes": t.kv_cache.value_bytes,
        "kv_cache_tokens": p.kv.tokens if p.kv else None,
        "headroom_bytes": int(headroom_gib(opt) * GIB),
        "notes": list(opt.notes),
    }


def to_json(result: TuneResult, model: str, extra: tuple[str, ...] = ()) -> dict:
    """The documented JSON contract of `vramguard tune --json` (`extra`: the launch's flags
    that do not change memory, carried into every command)."""
    req = result.request
    rec = result.recommended
    env = launch_env(result)
    recommended = None
    if rec is not None:
        recommended = {"command": command_for(rec, model, extra, env),
                       "settings": settings_for(rec),
                       "config_yaml": config_yaml(rec, model, extra, env),
                       "gpus_needed": rec.gpus_needed, "needs_more_gpus": rec.needs_more_gpus,
                       "plan": rec.plan.to_dict()}
    return {
        "recommended": recommended,
        "options": [option_dict(o, model, i, extra, env)
                    for i, o in enumerate(result.options, 1)],
        "reason": result.reason,
        "nearest": result.nearest,
        "blocking_pins": list(result.blocking_pins),
        "larger_gpus": list(result.larger_gpus),
        "notes": list(result.notes),
        "request": {
            "model": model, "gpus": [g.spec.name for g in req.gpus],
            "gpu_free_bytes": [g.free_bytes for g in req.gpus],
            "workload": req.workload.to_dict() if req.workload else None,
            "concurrency": req.concurrency, "target_kv_usage": req.target_kv_usage,
            "headroom_bytes": req.headroom_bytes, "vllm_version": req.vllm_version,
            "pinned": sorted(n for n in req.base.user_set if n not in _SKIP),
        },
        "curve": [{"max_model_len": x, "max_concurrency": y} for x, y in result.curve],
        "evaluated": result.num_evaluated,
    }


# ---- text --------------------------------------------------------------------------------

def _gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def _table(result: TuneResult, limit: int) -> list[str]:
    head = ("#", "GPUs", "TP", "PP", "weights", "KV", "util", "max_len", "seqs",
            f"conc@{int(result.request.target_kv_usage * 100)}%", "KV GiB", "headroom",
            "verdict")
    rows = [head]
    for i, o in enumerate(result.options[:limit], 1):
        s = o.settings
        verdict = ("ok" if o.starts and o.meets_target else "below target" if o.starts
                   else (o.plan.outcome.failure or "risk"))
        gpus = str(o.gpus_needed) + (f" (needs {o.gpus_needed})" if o.needs_more_gpus else "")
        util = (f"{s.gpu_memory_utilization:.2f}" if s.gpu_memory_utilization is not None
                else "default")
        if o.fixed_pool:
            util += "+fixed"
        rows.append((str(i), gpus, str(s.tensor_parallel_size), str(s.pipeline_parallel_size),
                     s.quantization or "as model", s.kv_cache_dtype or "auto", util,
                     str(o.max_model_len), str(o.max_num_seqs), str(o.supported_concurrency),
                     _gib(o.plan.tightest.kv_cache.value_bytes) if o.plan.outcome.failure
                     not in _NO_POOL else "-", f"{headroom_gib(o):.2f}",
                     verdict))
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


def _limit_text(opt: Option) -> str:
    return {LIMIT_VLLM: "capped by vLLM's max_num_seqs default, not memory",
            LIMIT_TARGET: "your --concurrency", LIMIT_PINNED: "your --max-num-seqs"}.get(
        opt.limit, "limited by KV memory at the target")


def render_tune(result: TuneResult, model: str, *, unicode: bool = True, max_options: int = 10,
                notes: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> str:
    """The terminal report of `vramguard tune` (`extra`: as `to_json`)."""
    from .chart import text_chart
    req = result.request
    rec = result.recommended
    env = launch_env(result)
    g = req.gpus[0].spec
    gpus = (f"{len(req.gpus)} x {g.name}" if all(x.spec == g for x in req.gpus)
            else ", ".join(x.spec.name for x in req.gpus))
    version = (rec or (result.options[0] if result.options else None))
    ver = f", vLLM {version.plan.vllm_version}" if version else ""
    out = [f"vramguard tune: {model} on {gpus}{ver}"]
    target = f"target: {int(req.target_kv_usage * 100)}% KV usage"
    if req.concurrency:
        target += f" at {req.concurrency} concurrent requests"
    if req.workload:
        w = req.workload
        out.append(f"workload: p50 {w.p50_tokens} · p90 {w.p90_tokens} · p99 {w.p99_tokens} "
                   f"tokens ({w.source}); {target}")
    else:
        out.append(target)
    out.append("")
    if rec is not None:
        ok = "✓" if unicode else "OK"
        kv = rec.plan.kv
        if kv is None:
            out.append(f"Recommended {ok} starts · {rec.max_num_seqs} concurrent request(s) of "
                       f"{rec.max_model_len} tokens (no KV cache: only max_num_seqs limits "
                       "the concurrency)")
        else:
            out.append(f"Recommended {ok} starts · {rec.max_num_seqs} concurrent request(s) of "
                       f"{rec.max_model_len} tokens within {int(req.target_kv_usage * 100)}% "
                       f"of the KV pool ({_limit_text(rec)})")
        if rec.needs_more_gpus:
            out.append(f"  needs {rec.gpus_needed} GPUs (you gave {len(req.gpus)})")
        out.append("")
        out.append("  " + command_for(rec, model, extra, env))
        out.append("")
        if rec.needs_more_gpus:
            here = next(((i, o) for i, o in enumerate(result.options, 1)
                         if o.starts and o.meets_target and not o.needs_more_gpus), None)
            if here is not None:
                i, o = here
                out.append(f"  On the {len(req.gpus)} GPU(s) given: option {i} "
                           f"({'; '.join(o.notes) or 'see the table'}):")
                out.append("    " + command_for(o, model, extra, env))
                out.append("")
        if kv is not None:
            out.append(f"  KV pool {_gib(rec.plan.tightest.kv_cache.value_bytes)} GiB per GPU = "
                       f"{kv.tokens:,} tokens · max concurrency {kv.max_concurrency:,.2f}x at "
                       f"{kv.max_model_len} · headroom {headroom_gib(rec):.2f} GiB on "
                       f"{rec.gpu.spec.name}")
        out += [f"  · {n}" for n in rec.notes]
    else:
        out.append(f"Nothing fits: {result.reason}")
        if result.nearest:
            out.append(f"Nearest feasible: {result.nearest}")
        if result.blocking_pins:
            flags = ", ".join("--" + p.replace("_", "-") for p in result.blocking_pins)
            out.append(f"Pinned flags that make the target impossible: {flags}")
        if result.larger_gpus:
            out.append(f"Would fit on {len(req.gpus)} x: {', '.join(result.larger_gpus)}")
    if result.options:
        out += ["", "Options (ranked)"] + _table(result, max_options)
        if len(result.options) > max_options:
            out.append(f"  … {len(result.options) - max_options} more (--json shows all)")
    if rec is not None and result.curve:
        out += ["", "max_model_len ↔ max concurrency (this setup, re-planned per length)"]
        out += ["  " + line for line in text_chart(result.curve, unicode=unicode,
                                                  mark=rec.max_model_len,
                                                  target=req.target_kv_usage)]
    if rec is not None:
        out += ["", "As a vLLM --config file:"]
        out += ["  " + line for line in config_yaml(rec, model, extra, env).splitlines()]
    all_notes = tuple(notes) + tuple(result.notes)
    if all_notes:
        out += ["", "Notes:"] + [f"  - {n}" for n in all_notes]
    out.append(f"\n({result.num_evaluated} candidate plans evaluated)")
    text = "\n".join(out)
    return text if unicode else text.translate(_ASCII)


_ASCII = str.maketrans({"·": "|", "…": "...", "↔": "<->", "✓": "OK", "◀": "<-", "│": "|",
                        "–": "-"})


