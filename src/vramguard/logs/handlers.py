"""The vLLM log line handlers: one method per family of lines, and the table that routes a
message to them (`_HANDLERS`: substring anchors -> handler).

`LineHandlers` is a mixin of `parser.LogParser`, which owns the record the handlers fill and
the streaming around them (wrapped messages, restarts, the fast path). A handler reads its
regexes from `patterns` and records only through the parser's state methods: `_set(name,
value, mode)`, `_advance(phase)`, `_marker(kind)`, `_error(kind, msg, phase, ...)`,
`_engine()`, and its `v` / `stats` / `errors` / `_touched` / `_line_errors` /
`_error_lines` attributes.
"""

from __future__ import annotations

from dataclasses import replace

from . import extracted as X
from . import patterns as P
from .extracted import CpuKv, KvMemorySuggestion
from .fields import _args_from_command, _config_dump, _f, _i, parse_args_dict, parse_oom

_MAX_ERROR_LINES = 5
_BOX = ("\u2584", "\u2588", "\u2580", "\u258c")


class LineHandlers:
    """The handlers of `LogParser` (mixed in; see the module docstring for the state used)."""

    # ---- handlers: identity ------------------------------------------------------------
    def _version(self, msg: str) -> None:
        m = P.API_VERSION.search(msg)
        if m:
            self._marker("server")
            self._set("version", m.group(1))
            return
        m = P.ENGINE_INIT.search(msg)
        if m:
            self._marker("engine")
            self._set("version", m.group(2))
            self._set("engine", "v1" if m.group(1) == "1" else "v0")
            cfg = _config_dump(msg[m.end():])
            self.v.setdefault("engine_config", {}).update(
                {k: v for k, v in cfg.items() if k not in self.v.get("engine_config", {})})
            self._set("model", cfg.get("model"))
            self._set("max_model_len", cfg.get("max_model_len"))
            return
        if any(c in msg for c in _BOX):
            m = P.BANNER_VERSION.search(msg)
            if m:
                self._marker("server")
                self._set("version", m.group(1))
            m = P.BANNER_MODEL.search(msg)
            if m:
                self._set("model", m.group(1))

    def _args(self, msg: str) -> None:
        m = P.ARGS.search(msg)
        if not m:
            return
        self._marker("args")
        args = parse_args_dict(m.group(1))
        self.v["non_default_args"] = args
        self._touched = True
        self._set("model", args.get("model") or args.get("model_tag"), "last")
        if isinstance(args.get("max_model_len"), int) and args["max_model_len"] > 0:
            self._set("max_model_len", args["max_model_len"], "last")

    def _command(self, msg: str) -> None:
        if "command_line" in self.v or P.LOG_RECORD.match(msg):
            return          # a vLLM log line that merely mentions `vllm serve`
        m = P.COMMAND.search(msg)
        if not m:
            return
        cmd = m.group(1).strip().rstrip("`").strip()
        self.v["command_line"] = cmd
        self._touched = True
        args = _args_from_command(cmd)
        if args and "non_default_args" not in self.v:
            self.v["non_default_args"] = args
            self._set("model", args.get("model"))

    def _misc(self, msg: str) -> None:
        m = P.ARCH.search(msg)
        if m:
            self._set("architecture", m.group(1))
        m = P.MAX_MODEL_LEN.search(msg)
        if m:
            self._set("max_model_len", int(m.group(1)), "last")
        m = P.BLOCK_SIZE.search(msg)
        if m:
            self._set("block_size", int(m.group(1)), "last")
        m = P.GPU_NAME.search(msg)
        if m:
            self._set("gpu_name", m.group(1).strip())
        if P.CUSTOM_AR_OFF.search(msg):
            self._set("custom_all_reduce_off", True)

    # ---- handlers: weights and profiling ----------------------------------------------
    def _loading(self, msg: str) -> None:
        m = P.WEIGHTS.search(msg)
        if m:
            self._set("weights_gib", _f(m.group(1)), "max")
            self._advance(X.PROFILING)
            return
        if "took" in msg and ("Loading weights took" in msg or "loading took" in msg):
            self._advance(X.PROFILING)
            return
        m = P.START_LOAD.search(msg)
        if m:
            self._set("model", m.group(1))
        self._advance(X.WEIGHT_LOADING)

    def _v0_profile(self, msg: str) -> None:
        got = False
        for rx, name, mode in ((P.V0_TOTAL, "total_gpu_gib", "first"),
                               (P.V0_USABLE, "requested_gib", "first"),
                               (P.V0_WEIGHTS, "weights_gib", "max"),
                               (P.V0_NON_TORCH, "non_torch_gib", "max"),
                               (P.V0_ACTIVATION, "activation_gib", "max"),
                               (P.V064_INITIAL, "initial_memory_usage_gib", "max"),
                               (P.V064_PEAK, "peak_torch_gib", "max")):
            m = rx.search(msg)
            if m:
                self._set(name, _f(m.group(1)), mode)
                got = True
        m = P.V0_UTIL.search(msg)
        if m and got:
            self._set("gpu_memory_utilization", _f(m.group(1)))
        m = P.V0_KV.search(msg)
        if m:
            self._set("profile_kv_gib", _f(m.group(1)), "min")
            self._advance(X.KV_ALLOCATION)
        elif got:
            self._advance(X.PROFILING)
        if got and "engine" not in self.v and "LLM engine" not in msg:
            self.v["engine_hint"] = "v0"

    def _profiling(self, msg: str) -> None:
        """A line the profile run prints while it runs (v0/v1 `profiling.py`: "The sequence
        length used for profiling ... is too short to hold the multi-modal embeddings")."""
        self._advance(X.PROFILING)

    def _v1_profile(self, msg: str) -> None:
        for rx, name in ((P.V1_NON_KV, "total_non_kv_gib"), (P.V1_PEAK, "torch_peak_increase_gib"),
                         (P.V1_NON_TORCH, "non_torch_gib"), (P.V1_CONSUMED, "total_consumed_gib"),
                         (P.V1_WEIGHTS, "weights_gib")):
            m = rx.search(msg)
            if m:
                self._set(name, _f(m.group(1)), "max")
        if "torch_peak_increase_gib" in self.v:
            self._set("activation_gib", self.v["torch_peak_increase_gib"], "max")
        self._advance(X.PROFILING)

    # ---- handlers: KV pool -------------------------------------------------------------
    def _kv(self, msg: str) -> None:
        m = P.AVAILABLE_KV.search(msg)
        if m:
            self._set("available_kv_gib", _f(m.group(1)), "min")
            self.v.setdefault("engine_hint", "v1")
            self._advance(X.KV_ALLOCATION)
        m = P.KV_TOKENS.search(msg)
        if m:
            self._set("kv_cache_tokens", _i(m.group(2)), "min")
            self._device_word(m.group(1))
            self._advance(X.KV_ALLOCATION)
        m = P.CONCURRENCY.search(msg)
        if m:
            self._set("concurrency_tokens_per_request", _i(m.group(1)), "last")
            self._set("max_concurrency", _f(m.group(2)), "min")
            self._advance(X.KV_ALLOCATION)

    def _device_word(self, word: str | None) -> None:
        if not word:
            return
        dev = {"gpu": "cuda", "cuda": "cuda", "rocm": "rocm"}.get(word.lower(), word.lower())
        if dev in ("cuda", "rocm", "cpu", "xpu", "hpu", "tpu", "npu", "neuron"):
            self._set("device", dev)

    def _blocks(self, msg: str) -> None:
        m = P.DEVICE_BLOCKS.search(msg)
        if m:
            self._set("num_gpu_blocks", _i(m.group(2)), "min")
            self._device_word(m.group(1))
            self._advance(X.KV_ALLOCATION)
        m = P.ENGINE_BLOCKS.search(msg)
        if m:
            self._set("num_gpu_blocks", _i(m.group(1)), "min")
            self.v.setdefault("engine_hint", "v1")
            self._advance(X.KV_ALLOCATION)
        m = P.CPU_BLOCKS.search(msg)
        if m:
            self._set("num_cpu_blocks", _i(m.group(1)), "min")
        m = P.OVERRIDE.search(msg)
        if m:
            self.v["blocks_override"] = (int(m.group(1)), int(m.group(2)))
            self._advance(X.KV_ALLOCATION)
        m = P.MAMBA.search(msg)
        if m:
            seqs, blocks = _i(m.group(1)), _i(m.group(2))
            self._error("mamba_blocks", msg, X.CUDA_GRAPH_CAPTURE, max_num_seqs=seqs,
                        num_blocks=blocks)
        elif "No available memory for the cache blocks" in msg:
            self._error("no_kv_memory", msg, X.KV_ALLOCATION)

    def _autofit(self, msg: str) -> None:
        m = P.AUTOFIT_REDUCED.search(msg)
        if m:
            self.v["auto_fit"] = (int(m.group(1)), int(m.group(2)))
            self._set("max_model_len", int(m.group(2)), "last")
        m = P.AUTOFIT_FULL.search(msg)
        if m:
            self.v["auto_fit"] = (int(m.group(1)), int(m.group(1)))
        if "Cannot auto-fit" in msg:
            self._error("autofit_fail", msg, X.KV_ALLOCATION)
        self._advance(X.KV_ALLOCATION)

    def _cpu_kv(self, msg: str) -> None:
        m = P.CPU_KV.search(msg)
        if not m:
            return
        kv_gib, node_gib = _f(m.group(2)), _f(m.group(3))
        if kv_gib is None or node_gib is None:
            return
        self.v["cpu_kv"] = CpuKv(kv_gib=kv_gib, node_total_gib=node_gib,
                                 explicit=m.group(1) == "Explicitly", node=int(m.group(4)),
                                 requested_gib=_f(m.group(5)), non_kv_gib=_f(m.group(6)))
        self._set("device", "cpu")
        self._advance(X.KV_ALLOCATION)

    # ---- handlers: graphs, suggestion, success -----------------------------------------
    def _graphs(self, msg: str) -> None:
        m = P.GRAPH_ESTIMATE.search(msg)
        if m:
            self._set("cuda_graph_estimate_gib", _f(m.group(1)), "max")
            return
        m = P.GRAPH_POOL.search(msg) or None
        done = P.GRAPH_DONE.search(msg)
        if m:
            self._set("cuda_graph_gib", _f(m.group(1)), "max")
            self._set("cuda_graph_estimate_gib", _f(m.group(2)), "max")
        if done and done.group(2) is not None:
            self._set("cuda_graph_gib", _f(done.group(2)), "max")
        if m or done:
            self._advance(X.SERVING if self._engine() == "v0" else X.SAMPLER_WARMUP)
        elif P.GRAPH_CAPTURING.search(msg):
            self._advance(X.CUDA_GRAPH_CAPTURE)

    def _suggestion(self, msg: str) -> None:
        head = P.SUGGEST_HEAD.search(msg)
        if not head:
            return
        old, new = P.SUGGEST_OLD.search(msg), P.SUGGEST_NEW.search(msg)
        sizes = P.SUGGEST_BYTES.findall(msg)
        cur = P.SUGGEST_CURRENT.search(msg)
        current = None
        if cur:
            raw = _f(cur.group(1))
            current = raw if cur.group(2) == "GiB" or raw is None else round(raw / (1 << 30), 2)
        s = KvMemorySuggestion(
            free_gib=_f(head.group(1)), total_gib=_f(head.group(2)),
            utilization=_f(head.group(3)), requested_gib=_f(head.group(4)),
            weights_gib=_f(old.group(1)) if old else None,
            activation_gib=_f((old or new).group(2)) if (old or new) else None,
            non_torch_gib=_f(old.group(3)) if old else None,
            cuda_graph_gib=_f(old.group(4) if old else new.group(3)) if (old or new) else None,
            consumed_gib=_f(new.group(1)) if new else None,
            fit_bytes=int(sizes[0]) if sizes else None,
            full_bytes=int(sizes[1]) if len(sizes) > 1 else None, current_kv_gib=current)
        self.v["suggestion"] = s
        self._set("free_at_start_gib", s.free_gib)
        self._set("total_gpu_gib", s.total_gib)
        self._set("gpu_memory_utilization", s.utilization)
        self._set("requested_gib", s.requested_gib)
        self._advance(X.SAMPLER_WARMUP)

    def _success(self, msg: str) -> None:
        m = P.INIT_ENGINE.search(msg)
        if m:
            self._set("init_engine_seconds", _f(m.group(1)), "last")
        if m or P.SERVER_UP.search(msg):
            self.v["started"] = True
            self._advance(X.SERVING)

    def _shutdown(self, msg: str) -> None:
        if P.SHUTDOWN.search(msg):
            self.v["stopped"] = True
            self._touched = True

    def _stats(self, msg: str) -> None:
        st = self.stats
        self._touched = True
        st["n"] = st.get("n", 0) + 1
        m = P.STATS_V1.search(msg)
        if m:
            running, swapped, waiting, pre, kv = m.groups()
        else:
            running, swapped, waiting, pre, kv = (
                (lambda mm: mm.group(1) if mm else None)(rx.search(msg))
                for rx in (P.RUNNING, P.SWAPPED, P.WAITING, P.PREEMPTIONS, P.KV_USAGE))
        for key, val in (("running", running), ("waiting", waiting), ("swapped", swapped)):
            if val is not None:
                val = int(val)
                st["last_" + key] = val
                st["max_" + key] = max(st.get("max_" + key, val), val)
        if kv is not None and _f(kv) is not None:
            val = _f(kv)
            st["last_kv"] = val
            st["max_kv"] = max(st.get("max_kv", val), val)
        if pre is not None:
            st["preemptions"] = st.get("preemptions", 0) + int(pre)
        if not self.v.get("started"):
            self.v["started"] = True
            self._advance(X.SERVING)

    # ---- handlers: errors --------------------------------------------------------------
    def _errors(self, msg: str) -> None:
        """Memory errors of §10, torch OOMs, distributed and generic engine failures.
        The first pattern that matches a line decides its kind."""
        if len(self.errors) > self._line_errors:      # already named by _blocks / _autofit
            return

        for check in (self._err_memory, self._err_fit, self._err_oom, self._err_other):
            if check(msg):
                return

    def _err_memory(self, msg: str) -> bool:
        m = P.FREE_LOW.search(msg)
        if m:
            kind = "engine_budget" if m.group(4).startswith("the engine") else "free_memory"
            self._set("free_at_start_gib", _f(m.group(2)))
            self._set("total_gpu_gib", _f(m.group(3)))
            self._set("gpu_memory_utilization", _f(m.group(5)))
            self._set("requested_gib", _f(m.group(6)))
            self._error(kind, msg, X.FREE_MEMORY_CHECK, device=m.group(1), free_gib=_f(m.group(2)),
                        total_gib=_f(m.group(3)), utilization=_f(m.group(5)),
                        requested_gib=_f(m.group(6)))
            return True
        m = P.EXTERNAL.search(msg) or P.CPU_LOW.search(msg)
        if m:
            kind = "external_weights" if "Externally" in msg else "free_memory"
            free, total, util, req = (_f(m.group(i)) for i in (2, 3, 4, 5))
            if kind == "free_memory":
                self._set("device", "cpu")
            self._error(kind, msg, X.FREE_MEMORY_CHECK, device=m.group(1), free_gib=free,
                        total_gib=total, utilization=util, requested_gib=req)
            return True
        m = P.CPU_KV_LOW.search(msg)
        if m:
            self._error("cpu_kv_memory", msg, X.KV_ALLOCATION, free_gib=_f(m.group(2)),
                        total_gib=_f(m.group(3)), kv_gib=_f(m.group(4)))
            return True
        if "Failed to load model - not enough" in msg:
            self._error("weights_oom", msg, X.WEIGHT_LOADING, oom=parse_oom(msg))
            return True
        m = P.SAMPLER.search(msg)
        if m:
            self._error("sampler_oom", msg, X.SAMPLER_WARMUP, what=m.group(1),
                        num_requests=int(m.group(2)))
            return True
        m = P.PROFILE_ERR.search(msg)
        if m:
            self._error("profiling_error", msg, X.PROFILING, initial_free_gib=_f(m.group(1)),
                        current_free_gib=_f(m.group(2)))
            return True
        m = P.PROFILE_ERR_BYTES.search(msg)
        if m:
            what = m.group(1)
            self._error("profiling_error", msg, X.PROFILING,
                        **{f"initial_{what}_gib": round(int(m.group(2)) / 2**30, 2),
                           f"current_{what}_gib": round(int(m.group(3)) / 2**30, 2)})
            return True
        if P.PROFILE_ERR_BARE.search(msg):
            self._error("profiling_error", msg, X.PROFILING)
            return True
        m = P.SWAP.search(msg)
        if m:
            self._error("swap_space", msg, None, swap_gib=_f(m.group(1)), cpu_gib=_f(m.group(2)))
            return True
        return False

    def _err_fit(self, msg: str) -> bool:
        m = P.FIT.search(msg)
        if m:
            est = P.FIT_ESTIMATE.search(msg)
            self._set("max_model_len", int(m.group(1)))
            self._error("kv_fit", msg, X.KV_ALLOCATION, max_model_len=int(m.group(1)),
                        needed_gib=_f(m.group(2)), available_gib=_f(m.group(4)),
                        estimated_max_model_len=int(est.group(1)) if est else None)
            return True
        m = P.FIT_HEAD.search(msg)
        if m:
            self._set("max_model_len", int(m.group(1)))
            self._error("kv_fit", msg, X.KV_ALLOCATION, max_model_len=int(m.group(1)))
            return True
        m = P.FIT_V0.search(msg)
        if m:
            self._set("max_model_len", int(m.group(1)))
            self._error("kv_fit_v0", msg, X.KV_ALLOCATION, max_model_len=int(m.group(1)),
                        max_tokens=int(m.group(2)))
            return True
        m = P.MAX_LEN_CONFIG.search(msg)
        if m:
            self._error("max_model_len_config", msg, X.STARTUP, max_model_len=int(m.group(1)))
            return True
        m = P.BLOCK_SIZE.search(msg)
        if m:
            size = m.group(1) or m.group(2)
            self._error("block_size", msg, X.STARTUP, block_size=int(size) if size else None)
            return True
        return False

    def _err_oom(self, msg: str) -> bool:
        if not P.OOM_ANY.search(msg) or "occurred when warming up" in msg:
            return False
        # NOTE: the innermost startup frame of the traceback says which phase ran out (an OOM
        # after the KV lines is the allocation itself, or the graph capture before its log).
        func, phase = self.frame if self.frame and self.phase != X.SERVING else (None, None)
        before = len(self.errors)
        self._error("torch_oom", msg, phase, oom=parse_oom(msg), frame=func)
        # NOTE: vLLM's engine logs the exception first, then its traceback: without a frame
        # yet, the frames that follow place it (`_frame`).
        self.oom_before_frames = ([before, False] if func is None and len(self.errors) > before
                                  else None)
        return True

    def _frame(self, msg: str) -> None:
        """A traceback line: the startup phase of the innermost vLLM frame seen so far."""
        if "Traceback (most recent call last)" in msg:
            self.frame = None
            pending = self.oom_before_frames
            if pending is not None:
                # NOTE: the traceback right after the OOM is its own; a later one is not
                self.oom_before_frames = None if pending[1] else [pending[0], True]
            return
        m = P.FRAME.search(msg)
        phase = _FRAME_PHASES.get(m.group(1)) if m else None
        # NOTE: the profile run calls the dummy sampler too: a sampler frame under it is
        # the profile run's.
        if phase and not (phase == X.SAMPLER_WARMUP and self.frame
                          and self.frame[1] == X.PROFILING):
            self.frame = (m.group(1), phase)
            self._place_pending_oom()

    def _place_pending_oom(self) -> None:
        """The OOM logged before this traceback takes its innermost phase frame."""
        pending = self.oom_before_frames
        if pending is None or not pending[1] or self.phase == X.SERVING:
            return
        err = self.errors[pending[0]]
        func, phase = self.frame
        self.errors[pending[0]] = replace(err, phase=phase, numbers={**err.numbers, "frame": func})

    def _err_other(self, msg: str) -> bool:
        for pattern, kind in ((P.SPEC_CONFIG, "spec_config"), (P.DCP_CONFIG, "dcp_config")):
            if pattern.search(msg):
                # NOTE: vLLM refuses these while building its config, before any memory
                self._error(kind, msg, X.STARTUP)
                return True
        if P.SHM.search(msg):
            m = P.SHM_NEED.search(msg)
            self._error("shm", msg, None, required_mib=int(m.group(1)) if m else None,
                        free_mib=int(m.group(2)) if m else None)
            return True
        if P.DISTRIBUTED.search(msg):
            self._error("distributed", msg, None)
            return True
        m = P.ENGINE_FAILED.search(msg)
        if m:
            self._error("engine_failed", msg, None, method=m.group(1))
            return True
        m = P.CUDA_ERROR.search(msg)
        if m:
            self._error("cuda_error", msg, None)
            return True
        m = P.EXCEPTION.search(msg)
        if m:
            self._error("exception", msg, None, exception=m.group(1))
            return True
        if P.ERROR_LEVEL.match(msg) and self._error_lines < _MAX_ERROR_LINES:
            self._error_lines += 1
            self._error("error_line", msg, None)
            return True
        return False


# vLLM functions whose frame in a traceback places a failure in a startup phase (v0 and v1).
_FRAME_PHASES = {
    "load_model": X.WEIGHT_LOADING, "load_weights": X.WEIGHT_LOADING,
    "profile_run": X.PROFILING, "determine_available_memory": X.PROFILING,
    "determine_num_available_blocks": X.PROFILING,
    "_allocate_kv_cache": X.KV_ALLOCATION, "_allocate_kv_cache_tensors": X.KV_ALLOCATION,
    "initialize_kv_cache_tensors": X.KV_ALLOCATION, "initialize_kv_cache": X.KV_ALLOCATION,
    "_init_cache_engine": X.KV_ALLOCATION, "allocate_kv_cache": X.KV_ALLOCATION,
    "init_kv_cache": X.KV_ALLOCATION,       # Model Runner V2 (v1/worker/gpu/attn_utils.py)
    "capture_model": X.CUDA_GRAPH_CAPTURE, "_dummy_sampler_run": X.SAMPLER_WARMUP,
    # the engine's serving loop (v0's multiprocessing engine, v1's engine core)
    "run_engine_loop": X.SERVING, "engine_step": X.SERVING, "run_busy_loop": X.SERVING,
    "_process_engine_step": X.SERVING,
}


def _is_stats(line: str) -> bool:
    """A periodic stats line. NOTE: every format (v0, v1, CPU) says "KV cache usage";
    requiring the reader's anchor keeps the fast path and the every-line path in agreement."""
    return "Running:" in line and "KV cache" in line and "reqs" in line


# substring(s) -> handler. A line goes to every handler whose substring it contains.
_HANDLERS = (
    (("server version", "LLM engine", "version "), LineHandlers._version),
    (("non-default args",), LineHandlers._args),
    (("vllm serve", "vllm.entrypoints"), LineHandlers._command),
    (("Resolved architecture", "max model len", "block size to", "NVIDIA", "AMD Instinct",
      "allreduce is disabled"), LineHandlers._misc),
    (("weights took", "loading took", "Starting to load model", "Loading safetensors",
      "Loading pt checkpoint", "Model loading"), LineHandlers._loading),
    (("total_gpu_memory", "weights take", "non_torch_memory", "activation peak", "KV Cache is",
      "available_kv_cache_memory", "instance can use"), LineHandlers._v0_profile),
    (("Total non KV cache memory", "torch peak memory increase"), LineHandlers._v1_profile),
    (("used for profiling",), LineHandlers._profiling),
    (("KV cache memory", "KV cache size", "Maximum concurrency"), LineHandlers._kv),
    (("blocks",), LineHandlers._blocks),
    (("Auto-fit", "auto-fit"), LineHandlers._autofit),
    (("for KV cache on node",), LineHandlers._cpu_kv),
    (("raph", "aptur"), LineHandlers._graphs),
    (("on startup. Desired",), LineHandlers._suggestion),
    (("init engine", "Starting vLLM", "startup complete"), LineHandlers._success),
    (("hutdown", "SIGTERM", "SIGINT"), LineHandlers._shutdown),
    (("Traceback", 'File "'), LineHandlers._frame),
    (("rror", "RROR", "ailed", "memory", "NCCL", "Watchdog", "max seq len", "allocate",
      "shm", "Bus error", "died", "Traceback", "max_model_len"), LineHandlers._errors),
)
