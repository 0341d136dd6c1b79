"""`vramguard stress`: ramp load on a vLLM endpoint and find the preemption knee.

    vramguard stress --url http://127.0.0.1:8000 --concurrency 1,2,4,8 \\
        [--prompt-tokens N] [--max-tokens M] [--requests-per-level K] [--duration-per-level S] \\
        [--model MODEL --gpu NAME [--vllm-flags "..."]] [--json]

Sends only to the URL given; every level is bounded in requests and seconds (docs/stress.md).
Exit status: 0 ramp done, 1 every request of the first level failed, 2 bad input/unreachable.
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    parser.add_argument("--url", required=True,
                        help="the vLLM server, e.g. http://127.0.0.1:8000 (the only target)")
    parser.add_argument("--concurrency", default="1,2,4,8",
                        help="increasing concurrency levels (default: 1,2,4,8)")
    parser.add_argument("--prompt-tokens", type=int, default=128, metavar="N",
                        help="prompt length in tokens (default: 128)")
    parser.add_argument("--max-tokens", type=int, default=64, metavar="M",
                        help="generated tokens per request (default: 64; EOS is ignored)")
    parser.add_argument("--requests-per-level", type=int, default=None, metavar="K",
                        help="requests per level (default: 2 x concurrency, at least 4)")
    parser.add_argument("--duration-per-level", type=float, default=60.0, metavar="S",
                        help="stop sending new requests after S seconds per level (default: 60)")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S",
                        help="one request's timeout in seconds (default: 120)")
    parser.add_argument("--served-model", default=None, metavar="NAME",
                        help="model name to request (default: the first of /v1/models)")
    parser.add_argument("--model", default=None,
                        help="plan this model too, to compare with the planner's concurrency")
    parser.add_argument("--gpu", default=None, help="GPU for the plan (with --model)")
    parser.add_argument("--vllm-version", default=None, help="vLLM release for the plan")
    parser.add_argument("--vllm-flags", default="", metavar="'FLAGS'",
                        help="the server's vLLM flags for the plan, one quoted string")
    parser.add_argument("--offline", action="store_true",
                        help="--model: do not use the network to fetch its config")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _split_flags(text: str) -> list[str]:
    """--vllm-flags as argv words, split like a pasted command line (UsageError on bad
    quotes, naming --vllm-flags)."""
    from ..errors import UsageError
    from ..sources.vllm_args import split_command_line
    try:
        return split_command_line(text)
    except UsageError as exc:
        exc.where = "--vllm-flags"
        raise


def _planned(args):
    """The planner's KV pool (PlannedKv) when --model is given, else None."""
    if not args.model:
        return None
    from ..monitor.stress import PlannedKv
    from . import plan as plan_cmd
    argv = [args.model, *_split_flags(args.vllm_flags)]
    for flag, value in (("--gpu", args.gpu), ("--vllm-version", args.vllm_version)):
        if value:
            argv += [flag, value]
    if args.offline:
        argv.append("--offline")
    plan, _, _ = plan_cmd.make_plan(plan_cmd.parse_options(argv))
    source = f"planner: {plan.model} on {plan.gpu}, vLLM {plan.vllm_version}"
    if plan.kv is None:
        return PlannedKv(None, None, None, f"{source}: {plan.outcome.failure or 'no KV pool'}")
    return PlannedKv(plan.kv.max_concurrency, plan.kv.num_blocks, plan.kv.block_size, source)


def _level_printer():
    """`on_level` for the text output: each level's line on stderr as it ends, the header
    before the first."""
    from ..render.stress_text import HEADER, render_level

    shown = []

    def progress(level) -> None:
        if not shown:
            print(HEADER, file=sys.stderr)
        shown.append(level)
        print(render_level(level), file=sys.stderr, flush=True)
    return progress


def run(args) -> int:
    import json

    from ..monitor.stress import StressConfig, parse_levels, run_stress
    from ..render.stress_text import render_stress

    config = StressConfig(
        url=args.url, levels=parse_levels(args.concurrency), prompt_tokens=args.prompt_tokens,
        max_tokens=args.max_tokens, requests_per_level=args.requests_per_level,
        duration_per_level_s=args.duration_per_level, request_timeout_s=args.timeout,
        model_name=args.served_model)
    planned = _planned(args)
    result = run_stress(config, planned=planned,
                        on_level=None if args.json else _level_printer())
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(render_stress(result))
    first = result.levels[0] if result.levels else None
    return 1 if first is not None and first.requests_ok == 0 else 0
