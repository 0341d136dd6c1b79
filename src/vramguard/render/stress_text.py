"""Plain-text rendering of a `vramguard stress` result. Takes results, never computes."""

from __future__ import annotations

from ..monitor.stress import LevelResult, StressResult


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _n(value) -> str:
    return "-" if value is None else str(value)


HEADER = (f"{'conc':>5} {'ok/sent':>8} {'p50':>7} {'p95':>7} {'tok/s':>8} "
          f"{'KV peak':>8} {'run':>4} {'wait':>5} {'preempt':>8}")


def render_level(level: LevelResult) -> str:
    """One table row (also the progress line printed after each level)."""
    row = (f"{level.concurrency:>5} {f'{level.requests_ok}/{level.requests_sent}':>8} "
           f"{_s(level.latency_p50_s):>7} {_s(level.latency_p95_s):>7} "
           f"{level.output_tokens_per_s:>8.1f} {_pct(level.kv_usage_peak):>8} "
           f"{_n(level.running_peak):>4} {_n(level.waiting_peak):>5} {_n(level.preemptions):>8}")
    if level.stopped_by == "time":
        row += "  (time limit)"
    return row


def render_stress(result: StressResult) -> str:
    """The table, the knee, and the planned/served concurrency next to it."""
    c, srv = result.config, result.server
    lines = [f"vramguard stress {result.url}  model {srv.model_name}  "
             f"prompt {c.prompt_tokens} + max {c.max_tokens} tokens", "", HEADER]
    lines += [render_level(level) for level in result.levels]
    for level in result.levels:
        for error in level.errors:
            lines.append(f"  conc {level.concurrency}: {error}")
        if (level.scrapes_failed or level.scrapes_stale) and level.kv_usage_peak is None:
            why = [f"{level.scrapes_failed} failed: {level.scrape_error}"] \
                if level.scrapes_failed else []
            if level.scrapes_stale:
                why.append(f"{level.scrapes_stale} showed none running while some were in "
                           "flight (vLLM's gauges lagging)")
            lines.append(f"  conc {level.concurrency}: no /metrics reading saw the requests "
                         f"({'; '.join(why)}); KV peak, running and waiting unknown")
    lines.append("")
    knee, first = result.knee, result.first_preempting
    if knee is None:
        lines.append("knee: none: the lowest level already preempted or failed")
    elif first is None and knee == result.levels[-1].concurrency:
        lines.append(f"knee: no preemption up to concurrency {knee} (the highest level tried)")
    else:
        lines.append(f"knee: concurrency {knee} runs without preemption"
                     + (f"; {first} preempts" if first is not None else ""))
    if srv.num_gpu_blocks is not None:
        fit = result.workload_fit
        lines.append(f"KV pool: {srv.num_gpu_blocks} blocks x {srv.block_size} tokens; "
                     f"requests of {c.prompt_tokens + c.max_tokens} tokens that fit at once: {fit}")
    if srv.kv_cache_max_concurrency is not None:
        lines.append(f"server's max concurrency at max_model_len {_n(srv.max_model_len)}: "
                     f"{srv.kv_cache_max_concurrency:.2f}x")
    planned = result.planned
    if planned is not None and planned.max_concurrency is not None:
        lines.append(f"planned: {planned.num_blocks} blocks x {planned.block_size} tokens, "
                     f"max concurrency {planned.max_concurrency:.2f}x at max_model_len; "
                     f"requests of this workload that fit: {result.planned_workload_fit} "
                     f"({planned.source})")
    elif planned is not None:
        lines.append(planned.source)
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)
