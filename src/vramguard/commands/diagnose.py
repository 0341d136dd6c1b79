"""`vramguard diagnose LOGFILE|-`: explain a vLLM startup or OOM log.

Parses, diagnoses, plans the same settings when the model can be loaded offline, renders.
Exit 0 whenever the log was read (whatever it says); 2 when it cannot be read.
"""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("log", metavar="LOGFILE", help="a vLLM log file, or - for stdin")
    parser.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    parser.add_argument("--gpu", help="the GPU (catalog name) when the log does not show it")
    parser.add_argument("--model", help="model id/folder for the side-by-side plan "
                        "(default: the one the log names)")
    parser.add_argument("--no-plan", action="store_true",
                        help="do not plan the same settings side by side")


def run(args) -> int:
    from ..logs.diagnose import diagnose
    from ..logs.parser import parse
    ex = parse(args.log)
    d = diagnose(ex)
    plan = rows = None
    why = None
    if not args.no_plan and d.status != "empty":
        from ..logs.compare import plan_for_log, side_by_side
        plan, why = plan_for_log(ex, gpu=args.gpu, model=args.model)
        if plan is not None:
            rows = side_by_side(ex, plan)
    if args.json:
        from ..render.json_out import print_json
        out = d.to_dict()
        out["plan"] = plan.to_dict() if plan is not None else None
        if plan is not None:
            out["side_by_side"] = [{"what": a, "log": b, "plan": c} for a, b, c in rows]
        out["plan_note"] = why
        print_json(out)
        return 0
    from ..render.diagnose_text import render
    print(render(d, source=None if args.log == "-" else args.log, side_by_side=rows,
                 plan_note=why if not args.no_plan and d.status != "empty" else None))
    return 0
