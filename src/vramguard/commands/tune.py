"""`vramguard tune`: vLLM settings that start and keep a KV-usage target, before launch.

    vramguard tune MODEL --gpu RTX-3090 --workload p50=800,p90=2000,p99=6000
    vramguard tune MODEL --gpu H100:4 --concurrency 64 --max-model-len 32k   (pins)
    vramguard tune [options] -- vllm serve MODEL --flag ...                  (pasted pins)

vLLM flags given (verbatim, parsed by `sources.vllm_args`) are pins: the tuner never
changes them and says which make the target impossible. Parses, calls `core.tuner.tune`,
renders. Exit codes: 0 a recommendation, 1 nothing fits (the report says why and what
is nearest), 2 bad input.
"""

from __future__ import annotations

DEFAULT_GPU = "H100-80GB"

HELP = """\
usage: vramguard tune MODEL [vLLM flags as pins] [options]
       vramguard tune [options] -- vllm serve MODEL [vLLM flags]

Recommend vLLM settings that start on the given GPUs and keep a KV-cache usage target:
gpu_memory_utilization, max_model_len (from the workload's p99), max_num_seqs,
max_num_batched_tokens, tensor-parallel size, fp8 KV cache, fp8 weights (alternative) and
--kv-cache-memory-bytes (0.10.2+). Every candidate is judged by the planner. vLLM flags you
give (-tp 2, --max-model-len 32k, --kv-cache-dtype auto, ...) are kept as they are.

options:
  --gpu NAME[:N]        GPU model from the catalog; repeat it (or NAME:N, NxNAME, A,B)
                        for several (default: H100-80GB); with several, the tightest card
                        decides
  --num-gpus N          how many GPUs of the --gpu kind (same as --gpu NAME:N)
  --gpu-memory-gib X    total GPU memory as CUDA reports it, in GiB (overrides the catalog)
  --gpu-free-gib X[,Y]  free memory per GPU now, in GiB (one value, or one per GPU)
  --workload SPEC       request lengths in tokens (prompt + output): p50=800,p90=2000,p99=6000
  --workload-file FILE  JSONL (prompt_tokens/output_tokens per line) or a vLLM benchmark JSON
  --concurrency N       concurrent requests to serve (default: as many as fit)
  --target-kv-usage F   fraction of the KV pool those requests may fill (default 0.7)
  --headroom-gib X      memory to leave free on each GPU (default: 4% of the card on a
                        shared GPU, 0 on an idle one)
  --vllm-version V      the vLLM release (default: the newest known)
  --engine v0|v1        the vLLM engine (default: the release's default)
  --no-fp8-weights      do not offer --quantization fp8 as an alternative
  --no-more-gpus        do not offer settings that need more GPUs than given
  --plot FILE           write the max_model_len <-> concurrency curve (.png or .html)
  --json                print the result as JSON (docs/tune.md)
  --offline             do not use the network to fetch model configs
  -h, --help            this help

exit status: 0 a recommendation, 1 nothing fits, 2 bad input.
"""

_OWN_VALUE = ("--gpu", "--num-gpus", "--gpu-memory-gib", "--gpu-free-gib", "--workload",
              "--workload-file", "--concurrency", "--target-kv-usage", "--headroom-gib",
              "--vllm-version", "--engine", "--plot")
_OWN_BOOL = ("--json", "--offline", "--no-fp8-weights", "--no-more-gpus", "--no-color")


class Options:
    def __init__(self):
        self.gpu: list[str] = []
        self.num_gpus = self.gpu_memory_gib = self.gpu_free_gib = None
        self.workload = self.workload_file = self.concurrency = None
        self.target_kv_usage = self.headroom_gib = self.vllm_version = None
        self.engine = self.plot = None
        self.json = self.offline = self.no_fp8_weights = self.no_more_gpus = False
        self.no_color = False
        self.vllm_tokens: list[str] = []
        self.pasted: list[str] | None = None
        self.help = False


def parse_options(argv: list[str]) -> Options:
    """Split vramguard's own options from the vLLM flags (pins) and a pasted command;
    --gpu may be repeated."""
    from ._options import split_options
    split = split_options(argv, bool_flags=_OWN_BOOL, value_flags=_OWN_VALUE,
                          repeatable=("--gpu",))
    return split.set_attributes(Options())


def _gib(flag: str, text: str, **kw) -> int:
    """A memory option in GiB, as bytes (bounded: `_options.MAX_GIB`)."""
    from ..core.provenance import GIB
    from ._options import MAX_GIB, number
    return int(number(flag, text, high=MAX_GIB, **kw) * GIB)


def _command(opts: Options):
    """The VllmCommand (model + pinned Settings) from the pasted line and/or the flags."""
    from ._options import launch_command
    return launch_command(opts, _OWN_VALUE + _OWN_BOOL)


def gpu_names(opts: Options) -> list[str]:
    """The GPU names, one per GPU: `--gpu A --gpu B`, `--gpu H100:4`, `--gpu 4xH100`,
    `--gpu A,B`, `--gpu H100 --num-gpus 4`."""
    from ..errors import UsageError
    from ._options import gpu_list, number
    names = gpu_list(opts.gpu or [DEFAULT_GPU])
    if not names:
        raise UsageError("no GPU given", where="--gpu", fix="Write --gpu NAME.")
    if opts.num_gpus is not None:
        n = number("--num-gpus", opts.num_gpus, kind=int, low=1, allow_low=True, high=1024)
        if len(set(names)) == 1 and len(names) in (1, n):
            names = names[:1] * n
        elif len(names) != n:
            raise UsageError(f"--num-gpus {n} contradicts the {len(names)} GPUs named",
                             where="--num-gpus", fix="Give one --gpu NAME with --num-gpus N.")
    return names


def gpu_targets(opts: Options) -> tuple:
    """GpuTargets from the names, --gpu-memory-gib and --gpu-free-gib."""
    from dataclasses import replace

    from ..core.gpu_catalog import lookup_gpu
    from ..core.provenance import GIB
    from ..core.tuner import GpuTarget
    from ..errors import UsageError
    names = gpu_names(opts)
    specs = [lookup_gpu(n) for n in names]   # NOTE: an unknown name raises, one line
    if opts.gpu_memory_gib is not None:
        total = _gib("--gpu-memory-gib", opts.gpu_memory_gib)
        specs = [replace(s, total_bytes=total, source="user") for s in specs]
    frees: list[int | None] = [None] * len(specs)
    if opts.gpu_free_gib is not None:
        values = [v.strip() for v in opts.gpu_free_gib.split(",") if v.strip()]
        if len(values) == 1:
            values = values * len(specs)
        if len(values) != len(specs):
            raise UsageError(f"{len(values)} free-memory values for {len(specs)} GPUs",
                             where="--gpu-free-gib", fix="Give one value, or one per GPU.")
        frees = [_gib("--gpu-free-gib", v, low=0, allow_low=True) for v in values]
        for s, f in zip(specs, frees):
            if f > s.total_bytes:
                raise UsageError(f"{f / GIB:.2f} GiB free is more than the {s.name}'s "
                                 f"{s.total_bytes / GIB:.2f} GiB", where="--gpu-free-gib")
    return tuple(GpuTarget(s, f) for s, f in zip(specs, frees))


def _workload(opts: Options):
    from ..errors import UsageError
    from ..sources.workload import parse_workload_spec, read_workload_file
    if opts.workload is not None and opts.workload_file is not None:
        raise UsageError("--workload and --workload-file contradict", where="--workload",
                         fix="Give one of them.")
    if opts.workload is not None:
        return parse_workload_spec(opts.workload)
    if opts.workload_file is not None:
        return read_workload_file(opts.workload_file)
    return None


def make_request(opts: Options):
    """Parse everything and build the TuneRequest. Returns (request, model ref, notes, the
    launch's flags that do not change memory, as given: carried into the commands)."""
    from dataclasses import replace

    from ..core.tuner import TuneRequest
    from ..errors import UsageError
    from ._options import number
    cmd = _command(opts)
    if not cmd.model:
        raise UsageError("no model given", where="MODEL",
                         fix="Write `vramguard tune MODEL --gpu NAME [flags]`.")
    engine = opts.engine or cmd.engine_hint
    if engine is not None and engine.lower() not in ("v0", "v1"):
        raise UsageError(f"invalid value {engine!r}", where="--engine", fix="Expected v0 or v1.")
    gpus = gpu_targets(opts)
    workload = _workload(opts)
    conc = (number("--concurrency", opts.concurrency, kind=int, low=1, allow_low=True)
            if opts.concurrency is not None else None)
    target = 0.7
    if opts.target_kv_usage is not None:
        target = number("--target-kv-usage", opts.target_kv_usage)
        if target > 1:
            raise UsageError(f"invalid value {opts.target_kv_usage!r}", where="--target-kv-usage",
                             fix="Expected a fraction 0 < F <= 1, e.g. 0.7.")
    headroom = (_gib("--headroom-gib", opts.headroom_gib, low=0, allow_low=True)
                if opts.headroom_gib is not None else None)
    notes = list(cmd.notes)
    if not opts.gpu:
        notes.append(f"GPU not given: assumed {DEFAULT_GPU}; pass --gpu NAME[:N]")
    if cmd.no_effect:
        notes.append("ignored (no effect on memory): " + " ".join(sorted(cmd.no_effect)))
    from ..core.parser_flags import check_launch
    from ..sources.draft import load_with_draft
    check_launch(cmd, opts.vllm_version or cmd.version_hint)
    spec, draft_notes = load_with_draft(cmd.model, cmd.settings, offline=opts.offline,
                                        config_overrides=cmd.config_overrides)
    notes += draft_notes
    base = replace(cmd.settings, model=cmd.model)
    req = TuneRequest(spec=spec, base=base, gpus=gpus, workload=workload, concurrency=conc,
                      headroom_bytes=headroom, target_kv_usage=target,
                      vllm_version=opts.vllm_version or cmd.version_hint,
                      engine=engine.lower() if engine else None,
                      allow_quantization=not opts.no_fp8_weights,
                      allow_more_gpus=not opts.no_more_gpus, env=tuple(cmd.env.items()))
    return req, cmd.model, notes, cmd.passthrough


def main(argv: list[str]) -> int:
    """Entry point of `vramguard tune` (see HELP)."""
    opts = parse_options(list(argv))
    if opts.help:
        print(HELP, end="")
        return 0
    req, model, notes, extra = make_request(opts)
    from ..core.tuner import tune
    result = tune(req)
    plot_note = None
    if opts.plot:
        if result.recommended is None:
            plot_note = "no plot written: nothing fits"
        else:
            from ..render.chart import write_plot
            path = write_plot(result.curve, opts.plot, target=req.target_kv_usage,
                              mark=result.recommended.max_model_len,
                              title=f"{model} · max_model_len ↔ max concurrency")
            plot_note = f"curve written to {path}"
    if opts.json:
        from ..render.json_out import print_json
        from ..render.tune_text import to_json
        doc = to_json(result, model, extra)
        doc["notes"] = notes + doc["notes"] + ([plot_note] if plot_note else [])
        print_json(doc)
    else:
        from ..render.plan_text import can_encode
        from ..render.tune_text import render_tune
        text = render_tune(result, model, unicode=can_encode("█◀↔✓·…▏"),
                           notes=tuple(notes) + ((plot_note,) if plot_note else ()), extra=extra)
        print(text)
    return 0 if result.recommended is not None else 1
