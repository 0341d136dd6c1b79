"""`vramguard history`: the startups `vramguard calibrate` has seen; `--compare A B`."""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("--compare", nargs=2, type=int, metavar=("A", "B"),
                        help="compare two startups by id: flags that differ, KV pool, concurrency")
    parser.add_argument("--limit", type=int, default=50, help="show at most this many (50)")
    parser.add_argument("--db", help="calibration store (default: $VRAMGUARD_DATA_DIR or the "
                        "user data dir)/calibration.sqlite3")
    parser.add_argument("--json", action="store_true", help="print as JSON")


def run(args) -> int:
    from ..errors import UsageError
    from ..logs.store import Store
    if args.limit < 1:
        raise UsageError(f"must be 1 or more, got {args.limit}", where="--limit",
                         fix="Use e.g. --limit 50")
    with Store(args.db, create=False) as store:
        if args.compare:
            a, b = (store.get(i) for i in args.compare)
            missing = [str(i) for i, s in zip(args.compare, (a, b)) if s is None]
            if missing:
                raise UsageError(f"no startup with id {', '.join(missing)}", where="--compare",
                                 fix="See the ids with `vramguard history`")
            return _compare(a, b, args.json)
        rows = store.startups(args.limit)
    if args.json:
        from ..render.json_out import print_json
        print_json([r.to_dict() for r in rows])
        return 0
    if not rows:
        print("no startups yet: run `vramguard calibrate LOG`")
        return 0
    print(f"{'id':>4}  {'seen':<16} {'model':<34} {'gpu':<12} {'vLLM':<7} {'tp/pp':<5} "
          f"{'KV GiB':>7} {'conc':>8}  flags")
    for r in rows:
        print(f"{r.id:>4}  {_when(r.seen_at):<16} {(r.model or '?')[-34:]:<34} {r.gpu:<12} "
              f"{r.vllm_version:<7} {r.tp}/{r.pp:<3} {_n(r.kv_pool_gib):>7} "
              f"{_n(r.max_concurrency):>8}  {_flags(r.flags)}")
    return 0


def _when(ts: float) -> str:
    import time
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _n(x) -> str:
    return "-" if x is None else f"{x:,.2f}"


def _flags(flags: dict) -> str:
    skip = {"model", "model_tag", "host", "port", "served_model_name"}
    return " ".join(f"{k}={v}" for k, v in sorted(flags.items()) if k not in skip)[:80]


def diff_flags(a: dict, b: dict) -> dict:
    """{flag: (a's value, b's value)} for flags that differ (absent = None)."""
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _compare(a, b, as_json: bool) -> int:
    flags = diff_flags(a.flags, b.flags)
    fields = ("model", "gpu", "vllm_version", "tp", "pp", "kv_pool_gib", "kv_tokens",
              "max_concurrency", "concurrency_tokens", "outcome")
    if as_json:
        from ..render.json_out import print_json
        print_json({"a": a.id, "b": b.id,
                    "flags": {k: {"a": x, "b": y} for k, (x, y) in flags.items()},
                    "fields": {f: {"a": getattr(a, f), "b": getattr(b, f)} for f in fields},
                    "kv_pool_change_gib": _delta(a.kv_pool_gib, b.kv_pool_gib),
                    "concurrency_change": _delta(a.max_concurrency, b.max_concurrency)})
        return 0
    print(f"startup #{a.id} -> #{b.id}")
    if flags:
        print("flags that differ:")
        for k, (x, y) in flags.items():
            print(f"  {k:<28} {x!s:>16} -> {y!s}")
    else:
        print("same flags")
    for f in fields:
        x, y = getattr(a, f), getattr(b, f)
        mark = "" if x == y else "   <-- changed"
        print(f"  {f:<20} {x!s:>16} -> {y!s}{mark}")
    dk, dc = _delta(a.kv_pool_gib, b.kv_pool_gib), _delta(a.max_concurrency, b.max_concurrency)
    if dk is not None:
        print(f"KV pool {dk:+.2f} GiB; concurrency "
              + (f"{dc:+.2f}x" if dc is not None else "unknown"))
    return 0


def _delta(x, y):
    return round(y - x, 4) if x is not None and y is not None else None
