"""`vramguard plan`: predict vLLM's startup (KV pool, concurrency, verdict) before launch.

    vramguard plan MODEL [vLLM flags] [--gpu NAME] [--json] ...
    vramguard plan [options] -- vllm serve MODEL --flag ...      (a pasted command line)

Parses, calls `load_model_spec` and `core.planner.plan`, renders. No arithmetic here.
Exit codes: 0 when the plan was made, whether it predicts a start or a failure (the
verdict is the output); 1 with --fail-on-error when the plan predicts a failure; 2 for
bad input (unknown flag, bad value, unknown GPU or model).
"""

from __future__ import annotations


DEFAULT_GPU = "H100-80GB"

HELP = """\
usage: vramguard plan MODEL [vLLM flags] [options]
       vramguard plan [options] -- vllm serve MODEL [vLLM flags]

Predict what vLLM will do at startup: the memory ledger per GPU, the KV-cache pool
(blocks, tokens, max concurrency), and whether it starts; without a GPU.

MODEL is a Hugging Face id, a local directory or a .gguf file. vLLM flags use vLLM's own
names (--max-model-len 32k, -tp 2, --gpu-memory-utilization 0.9, --kv-cache-dtype fp8,
--config serve.yaml, ...). After `--`, paste a whole launch command: `vllm serve ...`,
`python -m vllm.entrypoints.openai.api_server --model ...` or `docker run ...
vllm/vllm-openai:vX.Y.Z ...` (as separate words or one quoted string); flags given
before `--` override the pasted ones; vramguard's own options below are recognised
anywhere, also after `--`.

options:
  --gpu NAME            GPU model from the catalog, loosely matched (default: H100-80GB);
                        also NAME:N, NxNAME, A,B (GPUs of several models: the smallest
                        card is planned, the tightest rank)
  --gpu-memory-gib X    total GPU memory as CUDA reports it, in GiB (overrides the catalog)
  --gpu-free-gib X      free GPU memory when vLLM starts, in GiB (default: all but the
                        CUDA context)
  --vllm-version V      the vLLM release to predict (default: the newest known)
  --engine v0|v1        the vLLM engine (default: the release's default)
  --json                print the plan as JSON (schema: docs/json-schema.md)
  --all-ranks           show every GPU rank, not only the tightest
  --offline             do not use the network to fetch model configs
  --no-calibration      ignore what `vramguard calibrate` learned on this machine
  --db FILE             the calibration store (default: $VRAMGUARD_DATA_DIR or the user
                        data dir)/calibration.sqlite3
  --fail-on-error       exit 1 when the plan predicts that vLLM fails to start
  --no-color            no ANSI colours (also: NO_COLOR=1, or output not a terminal)
  -h, --help            this help

exit status: 0 plan made (also when it predicts a failure), 1 predicted failure with
--fail-on-error, 2 bad input.
"""

_OWN_VALUE = ("--gpu", "--gpu-memory-gib", "--gpu-free-gib", "--vllm-version", "--engine",
              "--db")
_OWN_BOOL = ("--json", "--all-ranks", "--offline", "--fail-on-error", "--no-color",
             "--no-calibration")


class _Options:
    def __init__(self):
        self.gpu: list[str] | None = None
        self.gpu_memory_gib: str | None = None
        self.gpu_free_gib: str | None = None
        self.vllm_version: str | None = None
        self.engine: str | None = None
        self.db: str | None = None
        self.json = self.all_ranks = self.offline = self.fail_on_error = self.no_color = False
        self.no_calibration = False
        self.vllm_tokens: list[str] = []     # vLLM flags (and MODEL) given to vramguard plan
        self.pasted: list[str] | None = None  # tokens after `--`
        self.help = False


def parse_options(argv: list[str]) -> _Options:
    """Split vramguard's own options from the vLLM flags and the pasted command. Own
    options are recognised anywhere, also after `--` (none of them is a vLLM flag)."""
    from ._options import split_options
    split = split_options(argv, bool_flags=_OWN_BOOL, value_flags=_OWN_VALUE,
                          own_after_dashdash=True, repeatable=("--gpu",))
    return split.set_attributes(_Options())


def _positive_gib(flag: str, text: str) -> float:
    from ._options import MAX_GIB, number
    return number(flag, text, high=MAX_GIB, unit="GiB", example="79.19")


def _command(opts: _Options):
    """The VllmCommand from the pasted line and/or the flags given to plan."""
    from ..errors import UsageError
    from ._options import launch_command
    if opts.pasted == []:
        raise UsageError("nothing after `--`", where="--",
                         fix="Paste the launch command after `--`: "
                             "`vramguard plan -- vllm serve MODEL ...`.")
    # `vramguard plan vllm serve M ...` / `vramguard plan "VAR=1 vllm serve M ..."` work too
    return launch_command(opts, _OWN_VALUE + _OWN_BOOL)


def _gpu(opts: _Options) -> tuple[object, list[str]]:
    """The GpuSpec to plan for, and assumptions to state about it."""
    from dataclasses import replace

    from ..core.gpu import GpuSpec
    from ..core.gpu_catalog import lookup_gpu
    from ..core.provenance import GIB
    notes: list[str] = []
    total = (_positive_gib("--gpu-memory-gib", opts.gpu_memory_gib)
             if opts.gpu_memory_gib is not None else None)
    if opts.gpu:
        gpu = _named_gpu(opts.gpu, notes)
        if total is not None:
            gpu = replace(gpu, total_bytes=int(total * GIB), source="user")
    elif total is not None:
        gpu = GpuSpec(name=f"GPU-{total:g}GiB", total_bytes=int(total * GIB), source="user")
    else:
        gpu = lookup_gpu(DEFAULT_GPU)
        notes.append(f"GPU not given: assumed {DEFAULT_GPU} "
                     f"({gpu.total_bytes / GIB:.2f} GiB as CUDA reports it); "
                     "pass --gpu NAME or --gpu-memory-gib X")
    return gpu, notes


def _named_gpu(values: list[str], notes: list[str]):
    """The GpuSpec of `--gpu` (`H100`, `H100:2`, `2xH100`, `L40S,L4`): with several models,
    the smallest card, the tightest rank (each rank's pool is sized from its own card; the
    engine keeps the smallest). NOTE: the GPU count is TP x PP, not the number named."""
    from ..core.gpu_catalog import lookup_gpu
    from ..core.provenance import GIB
    from ._options import gpu_list
    specs = {g.name: g for g in (lookup_gpu(n) for n in gpu_list(values))}
    gpu = min(specs.values(), key=lambda g: g.total_bytes)
    if len(specs) > 1:
        notes.append(f"GPUs of {len(specs)} models named ({', '.join(specs)}): planned on the "
                     f"smallest, {gpu.name} ({gpu.total_bytes / GIB:.2f} GiB), the tightest rank")
    return gpu


def _check_env_engine(version: str | None, cmd) -> None:
    """An engine the version lacks, chosen by VLLM_USE_V1 in the pasted line: the error names
    the variable (no --engine was given)."""
    from ..core.rules import resolve_rules
    from ..errors import UsageError
    try:
        resolve_rules(version, cmd.engine_hint)
    except UsageError as exc:
        if exc.where != "--engine":
            raise
        raise UsageError(exc.what, where=f"VLLM_USE_V1={cmd.env['VLLM_USE_V1']}",
                         fix="Drop VLLM_USE_V1 from the command, or plan another --vllm-version"
                         ) from None


def make_plan(opts: _Options):
    """Parse inputs, load the model, call the planner. Returns (plan, cmd, notes)."""
    from ..errors import UsageError
    cmd = _command(opts)
    if not cmd.model:
        raise UsageError("no model given", where="MODEL",
                         fix="Write `vramguard plan MODEL [flags]` or paste "
                             "`vramguard plan -- vllm serve MODEL ...`.")
    engine = opts.engine or cmd.engine_hint
    if engine is not None and engine.lower() not in ("v0", "v1"):
        raise UsageError(f"invalid value {engine!r}", where="--engine", fix="Expected v0 or v1.")
    version = opts.vllm_version or cmd.version_hint
    if opts.engine is None and cmd.engine_hint is not None:
        _check_env_engine(version, cmd)
    gpu, notes = _gpu(opts)
    free_bytes = None
    if opts.gpu_free_gib is not None:
        from ..core.provenance import GIB
        free_bytes = int(_positive_gib("--gpu-free-gib", opts.gpu_free_gib) * GIB)
        if free_bytes > gpu.total_bytes:
            raise UsageError(f"{opts.gpu_free_gib} GiB free is more than the "
                             f"{gpu.total_bytes / GIB:.2f} GiB total of {gpu.name}",
                             where="--gpu-free-gib",
                             fix="Give the free memory at startup (nvidia-smi's total minus "
                                 "used), or set the total with --gpu-memory-gib.")
    if opts.vllm_version is None and cmd.version_hint:
        notes.append(f"vLLM {cmd.version_hint} taken from the docker image tag")
    if opts.engine is None and cmd.engine_hint:
        notes.append(f"engine {cmd.engine_hint} from VLLM_USE_V1={cmd.env['VLLM_USE_V1']}")
    notes += list(cmd.notes)
    if cmd.no_effect:
        notes.append("ignored (no effect on startup memory): " + " ".join(cmd.no_effect))

    from ..core.planner import plan as run_planner
    from ..core.parser_flags import check_launch
    from ..sources.draft import load_with_draft
    check_launch(cmd, version)                # NOTE: argparse's, before anything is read
    spec, draft_notes = load_with_draft(cmd.model, cmd.settings, offline=opts.offline,
                                        config_overrides=cmd.config_overrides)
    notes += draft_notes
    calibration = (None if opts.no_calibration
                   else _calibration(opts, cmd, spec, gpu, version, notes))
    plan = run_planner(spec, cmd.settings, gpu, vllm_version=version,
                       engine=engine.lower() if engine else None, free_bytes=free_bytes,
                       calibration=calibration, env=dict(cmd.env))
    return plan, cmd, notes


def _calibration(opts: _Options, cmd, spec, gpu, version: str | None, notes: list[str]):
    """The newest matching calibration from `vramguard calibrate`'s store, or None (a `--db`
    that cannot be read is said in `notes`)."""
    from ..core.calibration import CalibrationKey
    from ..core.rules import NEWEST_VERSION
    from ..logs.store import default_db_may_exist, load_calibration
    if opts.db is None and not default_db_may_exist():
        return None
    s = cmd.settings
    key = CalibrationKey(gpu_name=gpu.name, vllm_version=version or NEWEST_VERSION,
                         model_family=spec.model_type,
                         tensor_parallel_size=s.tensor_parallel_size,
                         pipeline_parallel_size=s.pipeline_parallel_size)
    why: list[str] = []
    cal = load_calibration(key, opts.db, model=cmd.model, settings=s,
                           problems=why if opts.db is not None else None)
    if why:
        notes.append(f"--db {opts.db}: {why[0]}; planned without a calibration")
    return cal


def _fix_command(plan, cmd) -> str | None:
    """The user's own command line with the first fix's flags applied."""
    if not plan.fixes or not plan.fixes[0].flags:
        return None
    from ..sources.vllm_args import command_with
    return command_with(cmd, dict(plan.fixes[0].flags))


def main(argv: list[str]) -> int:
    """Entry point of `vramguard plan` (see HELP)."""
    opts = parse_options(list(argv))
    if opts.help:
        print(HELP, end="")
        return 0
    plan, cmd, notes = make_plan(opts)
    if opts.json:
        from dataclasses import replace

        from ..render.json_out import print_json
        if notes:
            plan = replace(plan, assumptions=tuple(notes) + tuple(plan.assumptions))
        print_json(plan.to_dict())
    else:
        from ..render.plan_text import render_plan, use_color
        color = use_color() and not opts.no_color
        print(render_plan(plan, all_ranks=opts.all_ranks, color=color,
                          fix_command=_fix_command(plan, cmd), extra_assumptions=tuple(notes)))
    if opts.fail_on_error and not plan.outcome.ok:
        return 1
    return 0
