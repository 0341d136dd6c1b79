"""`vramguard calibrate LOG…`: learn this machine's activation, non-torch and CUDA-graph terms
(and weights) from vLLM startup logs, into the local calibration store.

Each log is keyed by (GPU, vLLM version, model family, TP, PP). `vramguard plan` then uses
the newest matching calibration (`vramguard.logs.store.load_calibration`).
Exit 0 when every log was read (a log with too few numbers, or with a TP / PP /
gpu_memory_utilization the plan flags would refuse, is reported and skipped),
2 when a log cannot be read or the GPU / model family / vLLM version cannot be told.
"""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("logs", nargs="+", metavar="LOG", help="vLLM startup logs (- for stdin)")
    parser.add_argument("--gpu", help="the GPU (catalog name); default: matched from the "
                        "log's total memory")
    parser.add_argument("--model", help="model id/folder to read model_type from (default: "
                        "the one the log names)")
    parser.add_argument("--model-family", help="model_type to key on (e.g. llama, qwen3_moe)")
    parser.add_argument("--vllm-version", help="vLLM version when the log does not print it")
    parser.add_argument("--db", help="calibration store (default: $VRAMGUARD_DATA_DIR or the "
                        "user data dir)/calibration.sqlite3")
    parser.add_argument("--json", action="store_true", help="print what was learned as JSON")


def run(args) -> int:
    from ..errors import UsageError
    from ..logs.calibrate import calibrate_log
    from ..logs.store import Store
    results = []
    with Store(args.db) as store:
        for path in args.logs:
            try:
                results.append(calibrate_log(path, store, gpu=args.gpu, model=args.model,
                                             model_family=args.model_family,
                                             vllm_version=args.vllm_version))
            except UsageError as exc:
                exc.where = exc.where or path
                raise
        where = str(store.path)
    if args.json:
        from ..render.json_out import print_json
        print_json({"db": where, "results": results})
        return 0
    for r in results:
        print(_line(r))
        for note in r.get("notes", ()):
            print(f"    note: {note}")
    print(f"store: {where}")
    return 0


def _line(r: dict) -> str:
    if not r.get("learned"):
        return f"{r['source']}: skipped: {r['reason']}"
    k = r["key"]
    t = r["terms_gib"]
    terms = ", ".join(f"{name} {val:.2f}" for name, val in t.items() if val is not None)
    new = "new" if r["new"] else "updated"
    return (f"{r['source']}: #{r['id']} {new}: {k['gpu_name']} vLLM {k['vllm_version']} "
            f"{k['model_family']} tp{k['tensor_parallel_size']} pp{k['pipeline_parallel_size']}"
            f" [{r['derivation']}] GiB: {terms}")
