"""`vramguard table`: the sizing table of models x GPUs, computed from real architectures.

    vramguard table --models 1B,8B,70B --gpus L4,A100-80GB,H100 --max-model-len 4096 \\
        --concurrency 32 --format markdown

Size labels map to representative catalog models (core.table.SIZE_MODELS); anything else
is a model id, folder or config.json. Parses, calls `core.table.sizing_table`, renders.
"""

from __future__ import annotations


def add_arguments(parser) -> None:
    from ..core.table import DEFAULT_GPUS, DEFAULT_MODELS, SIZE_MODELS
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="comma-separated size labels (" + ", ".join(SIZE_MODELS)
                        + ") or model ids (default: %(default)s)")
    parser.add_argument("--gpus", default=",".join(DEFAULT_GPUS),
                        help="comma-separated catalog GPU names (default: %(default)s)")
    parser.add_argument("--max-model-len", default="4096",
                        help="tokens per sequence (k/K suffixes; default: %(default)s)")
    parser.add_argument("--concurrency", default="32",
                        help="concurrent sequences the KV pool must hold (default: %(default)s)")
    parser.add_argument("--dtype", default="auto", help="weights dtype (vLLM --dtype)")
    parser.add_argument("--kv-cache-dtype", default="auto", help="vLLM --kv-cache-dtype")
    parser.add_argument("--gpu-memory-utilization", default=None,
                        help="fraction of each GPU vLLM may use (default: the version's)")
    parser.add_argument("--vllm-version", default=None, help="the vLLM release (default: newest)")
    parser.add_argument("--format", default="markdown", choices=("markdown", "csv", "json"))
    parser.add_argument("--offline", action="store_true",
                        help="do not use the network to fetch model configs")


def _int(flag: str, text: str) -> int:
    from ..errors import UsageError
    from ..sources.vllm_args import human_readable_int
    n = human_readable_int(str(text))
    if n is None or n < 1:
        raise UsageError(f"invalid value {text!r}", where=flag,
                         fix="Expected a whole number >= 1 (k/K suffixes allowed).")
    return n


def _check_choice(flag: str, value: str) -> str:
    from ..sources.vllm_args import convert_value
    convert_value(flag, value)       # NOTE: vLLM's own choices; raises UsageError
    return value


def make_request(args):
    """Parse the arguments and resolve the models. Returns a TableRequest."""
    from ..core.gpu_catalog import lookup_gpu
    from ..core.table import TableRequest, model_for_label
    from ..errors import UsageError
    from ..sources.resolve import load_model_spec
    labels = [m.strip() for m in str(args.models).split(",") if m.strip()]
    names = [g.strip() for g in str(args.gpus).split(",") if g.strip()]
    if not labels:
        raise UsageError("no model given", where="--models", fix="e.g. --models 1B,8B,70B")
    if not names:
        raise UsageError("no GPU given", where="--gpus", fix="e.g. --gpus L4,H100")
    gpus = tuple(lookup_gpu(n) for n in names)
    util = None
    if args.gpu_memory_utilization is not None:
        try:
            util = float(args.gpu_memory_utilization)
        except ValueError:
            util = -1.0
        if not 0 < util <= 1:
            raise UsageError(f"invalid value {args.gpu_memory_utilization!r}",
                             where="--gpu-memory-utilization", fix="Expected 0 < value <= 1.")
    if args.vllm_version is not None:
        from ..core.rules import resolve_rules
        resolve_rules(args.vllm_version)     # NOTE: a bad version is one error, not one per cell
    models = []
    for label in labels:
        ref = model_for_label(label)
        models.append((label, load_model_spec(ref, offline=args.offline)))
    return TableRequest(models=tuple(models), gpus=gpus,
                        max_model_len=_int("--max-model-len", args.max_model_len),
                        concurrency=_int("--concurrency", args.concurrency),
                        dtype=_check_choice("--dtype", args.dtype),
                        kv_cache_dtype=_check_choice("--kv-cache-dtype", args.kv_cache_dtype),
                        gpu_memory_utilization=util, vllm_version=args.vllm_version)


def run(args) -> int:
    from ..core.table import sizing_table
    from ..render import table_out
    req = make_request(args)
    rows = sizing_table(req)
    if args.format == "json":
        from ..render.json_out import print_json
        print_json(table_out.json_doc(rows, req))
    elif args.format == "csv":
        print(table_out.csv_text(rows, req), end="")
    else:
        print(table_out.markdown(rows, req), end="")
    return 0
