"""CUDA graphs and vLLM's compilation flags, release by release (stage_terms.cudagraph_mode).

Facts read in vLLM's config/vllm.py, config/compilation.py and engine/arg_utils.py (0.7 -
0.33; rules.py `cudagraph_control`): V1 up to 0.9.0 forces compilation level 3 (only
--enforce-eager turns graphs off); 0.9.1-0.10.0 `use_cudagraph: false`; 0.10.1-0.11.x no
graphs unless the level is 3 (or a cudagraph_mode is given); from 0.12 `-O N` is the
optimization level (O0 NONE, O1 PIECEWISE, O2/O3 FULL_AND_PIECEWISE) and a compilation mode
other than 3 turns graph modes off: all of them in 0.12, those needing piecewise compilation
in 0.13-0.29, and from 0.30 FULL_AND_PIECEWISE becomes FULL_DECODE_ONLY.
"""

import pytest

from core_specs import llama31_8b, qwen3_next_kv_only
from vramguard.core import failures as F
from vramguard.core.gpu import GpuSpec
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import PlanHooks, plan
from vramguard.core.provenance import GIB
from vramguard.core.rules import resolve_rules
from vramguard.core.settings import Settings
from vramguard.core.stage_terms import cudagraph_mode
from vramguard.errors import UsageError

H100 = GpuSpec(name="H100-80GB", total_bytes=int(79.19 * GIB), compute_capability=(9, 0))
S = Settings
FAP, PW, FDO = "FULL_AND_PIECEWISE", "PIECEWISE", "FULL_DECODE_ONLY"

# settings -> the mode per release (V1)
CASES = [
    (S(),                                   {"0.8.5": PW, "0.10.0": PW, "0.10.1": PW,
                                             "0.11.0": FAP, "0.12.0": FAP, "0.33.0": FAP}),
    (S(enforce_eager=True),                 dict.fromkeys(("0.8.5", "0.11.0", "0.33.0"), "NONE")),
    (S(optimization_level=0),               {"0.8.5": PW, "0.10.0": PW, "0.10.1": "NONE",
                                             "0.11.0": "NONE", "0.12.0": "NONE",
                                             "0.33.0": "NONE"}),
    (S(optimization_level=1),               {"0.10.1": "NONE", "0.12.0": PW, "0.33.0": PW}),
    (S(optimization_level=3),               {"0.11.0": FAP, "0.12.0": FAP}),
    (S(compilation_mode=0),                 {"0.9.1": PW, "0.11.0": "NONE", "0.12.0": "NONE",
                                             "0.29.0": "NONE", "0.30.0": FDO, "0.33.0": FDO}),
    (S(cudagraph_mode="NONE"),              {"0.9.0": PW, "0.9.1": "NONE", "0.11.0": "NONE",
                                             "0.33.0": "NONE"}),
    (S(cudagraph_mode="FULL", optimization_level=0),
                                            {"0.11.0": "FULL", "0.12.0": "NONE",
                                             "0.13.0": "FULL", "0.33.0": "FULL"}),
    (S(cudagraph_mode=PW, compilation_mode=0), {"0.13.0": "NONE", "0.30.0": "NONE"}),
]


@pytest.mark.parametrize("settings, by_version", CASES)
def test_cudagraph_mode_by_release(settings, by_version):
    for version, mode in by_version.items():
        assert cudagraph_mode(settings, resolve_rules(version, "v1")) == mode, version


def test_v0_and_the_cpu_follow_enforce_eager_only():
    assert cudagraph_mode(S(optimization_level=0), resolve_rules("0.9.2", "v0")) != "NONE"
    assert cudagraph_mode(S(), resolve_rules("0.33.0"), device="cpu") == "NONE"
    v0 = plan(llama31_8b(), Settings(max_model_len=4096, optimization_level=0), H100,
              vllm_version="0.9.2", engine="v0")
    assert v0.tightest.cuda_graph.value_bytes > 0
    assert any("V0 engine captures its CUDA graphs" in a for a in v0.assumptions)


def _plan(version="0.33.0", **kw):
    return plan(llama31_8b(), Settings(max_model_len=4096, **kw), H100, vllm_version=version)


def test_o0_captures_no_graphs_and_the_budget_keeps_their_memory():
    """-O0 on 0.20+: no graph estimate is subtracted, so the pool grows by it; the plan says
    where the mode came from."""
    base, o0 = _plan(), _plan(optimization_level=0, user_set=frozenset({"optimization_level"}))
    g = base.tightest.cuda_graph.value_bytes
    assert g > 0 and o0.tightest.cuda_graph.value_bytes == 0
    assert o0.tightest.kv_cache.value_bytes == base.tightest.kv_cache.value_bytes + g
    assert (o0.settings["cudagraph_mode"], o0.settings_sources["cudagraph_mode"]) == \
        ("NONE", "derived")
    assert (base.settings["cudagraph_mode"], base.settings_sources["cudagraph_mode"]) == \
        (FAP, "vllm_default")
    assert any("-O=0: no CUDA graphs are captured" in a for a in o0.assumptions)
    # before 0.10.1 the release has no cudagraph_mode and -O0 changes nothing (level forced)
    old = _plan("0.10.0", optimization_level=0)
    assert "cudagraph_mode" not in old.settings
    assert old.tightest.cuda_graph.value_bytes == _plan("0.10.0").tightest.cuda_graph.value_bytes


def test_capture_lists_count_the_sizes_vllm_keeps():
    """A user list replaces vLLM's 67 default sizes: distinct sizes, from 0.11.1 only those
    <= max_num_batched_tokens; an empty result captures nothing; --cuda-graph-sizes N (0.9 -
    0.11.0) is the default pattern up to N, a flag vLLM 0.13 no longer has."""
    base = _plan().tightest.cuda_graph.value_bytes

    def graph(version="0.33.0", **kw):
        return _plan(version, **kw).tightest.cuda_graph.value_bytes
    assert graph(cudagraph_capture_sizes=(1, 2, 4, 8, 8)) == int(base * (0.4 + 0.6 * 4 / 67))
    assert graph(cudagraph_capture_sizes=(1, 2, 4, 8, 4096), max_num_batched_tokens=2048) == \
        int(base * (0.4 + 0.6 * 4 / 67))
    assert graph(cudagraph_capture_sizes=(4096,), max_num_batched_tokens=2048) == 0
    v010 = graph("0.10.0")
    assert graph("0.10.0", cuda_graph_sizes=(64,)) == int(v010 * (0.4 + 0.6 * 11 / 67))
    assert graph("0.10.0", cuda_graph_sizes=(8, 16)) == int(v010 * (0.4 + 0.6 * 2 / 67))
    with pytest.raises(UsageError, match="unrecognized arguments: --cuda-graph-sizes 64"):
        _plan("0.13.0", cuda_graph_sizes=(64,))


def test_max_cudagraph_capture_size_exists_from_0111():
    assert _plan("0.11.1", max_cudagraph_capture_size=64).outcome.ok
    with pytest.raises(UsageError, match="V1 0.11.1"):
        _plan("0.11.0", max_cudagraph_capture_size=64)


def test_piecewise_graphs_skip_the_mamba_blocks_check():
    """vLLM checks max_num_seqs against the Mamba blocks for full decode graphs only: the
    failure's fixes offer piecewise graphs, and that plan starts."""
    g = lookup_gpu("H200")
    hooks = PlanHooks(weights_bytes=120 * GIB, activation_bytes=GIB, non_torch_bytes=0,
                      cuda_graph_bytes=0)

    def run(**kw):
        return plan(qwen3_next_kv_only(), Settings(max_num_seqs=1024, gpu_memory_utilization=0.92,
                                                   **kw), g, vllm_version="0.20.0", hooks=hooks)
    failed = run()
    assert failed.outcome.failure == F.MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS
    assert {"--compilation-config": '{"cudagraph_mode": "PIECEWISE"}'} in \
        [f.flags for f in failed.fixes]
    assert run(cudagraph_mode=PW).outcome.ok
    assert run(cudagraph_mode="FULL_DECODE_ONLY").outcome.failure == \
        F.MAMBA_BLOCKS_BELOW_MAX_NUM_SEQS


def test_graph_probe_all_reduce_needs_captured_graphs():
    """0.18+: custom all-reduce memory lands in N through the graph-memory probe; without
    graphs (-O0 as with --enforce-eager) it does not."""
    two = dict(tensor_parallel_size=2)
    on, off = _plan("0.20.0", **two), _plan("0.20.0", optimization_level=0, **two)
    eager = _plan("0.20.0", enforce_eager=True, **two)
    assert off.tightest.non_torch.value_bytes == eager.tightest.non_torch.value_bytes
    assert on.tightest.non_torch.value_bytes > off.tightest.non_torch.value_bytes


def test_performance_mode_from_017():
    """--performance-mode (0.17+, engine/arg_utils.py and config/vllm.py): throughput doubles
    the default batched tokens and sequences (not the user's), interactivity captures every
    size from 1 to 32 then vLLM's usual steps; an error before 0.17 names the release asked."""
    base = _plan(max_num_seqs=None)
    thr = _plan(performance_mode="throughput")
    assert thr.settings["max_num_batched_tokens"] == 2 * base.settings["max_num_batched_tokens"]
    assert thr.settings["max_num_seqs"] == 2 * base.settings["max_num_seqs"]
    assert thr.tightest.activation.value_bytes > base.tightest.activation.value_bytes
    pinned = _plan(performance_mode="throughput", max_num_seqs=64, max_num_batched_tokens=4096)
    assert (pinned.settings["max_num_seqs"], pinned.settings["max_num_batched_tokens"]) == \
        (64, 4096)
    # 16 sequences: vLLM's largest size 32; 1..32 = 32 sizes instead of 1, 2, 4, 8, 16, 24, 32
    few = _plan(max_num_seqs=16).tightest.cuda_graph.value_bytes
    fine = _plan(max_num_seqs=16, performance_mode="interactivity").tightest.cuda_graph.value_bytes
    full = base.tightest.cuda_graph.value_bytes
    assert few == int(full * (0.4 + 0.6 * 7 / 67)) and fine == int(full * (0.4 + 0.6 * 32 / 67))
    with pytest.raises(UsageError, match=r"vLLM 0\.16\.0 \(v1\) has no such flag \(0\.17\+\)"):
        _plan("0.16.0", performance_mode="throughput")


def test_what_the_model_and_parallelism_do_to_the_mode():
    """Released code: DP forces eager in V1 0.8.0-0.9.0 (platforms/cuda.py); 0.10.2 gives
    Mamba/hybrid models FULL_AND_PIECEWISE (models/config.py); pooling models drop full graphs
    (0.11.0 by default, 0.11.1+ any full mode); DCP > 1 does in 0.11.1-0.12 (config/vllm.py)."""
    from dataclasses import replace
    dense, hybrid = llama31_8b(), qwen3_next_kv_only()
    encoder = replace(llama31_8b(), is_encoder_only=True)

    def mode(version, spec=dense, **flags):
        return cudagraph_mode(S(**flags), resolve_rules(version), spec=spec)
    assert [mode(v, data_parallel_size=2) for v in ("0.8.0", "0.9.0", "0.9.1")] == \
        ["NONE", "NONE", PW]
    assert [mode(v, hybrid) for v in ("0.10.1", "0.10.2", "0.11.0")] == [PW, FAP, FAP]
    assert mode("0.10.2", hybrid, cudagraph_mode=PW) == PW
    assert [mode(v, encoder) for v in ("0.10.2", "0.11.0", "0.20.0")] == [PW, PW, PW]
    assert mode("0.11.0", encoder, cudagraph_mode=FAP) == FAP
    assert mode("0.11.1", encoder, cudagraph_mode=FAP) == PW
    assert [mode(v, decode_context_parallel_size=2) for v in ("0.11.1", "0.12.0", "0.13.0")] == \
        [PW, PW, FAP]
    assert cudagraph_mode(S(), resolve_rules("0.20.0")) == FAP     # no spec: the flags only


@pytest.mark.parametrize("version, text", [
    ("0.10.1", "Compilation level should be CompilationLevel.PIECEWISE when cudagraph_mode "
               "piecewise cudagraphs is used, cudagraph_mode=CUDAGraphMode.PIECEWISE"),
    ("0.11.2", "Compilation mode should be CompilationMode.VLLM_COMPILE when cudagraph_mode "
               "piecewise cudagraphs is used, cudagraph_mode=PIECEWISE"),
])
def test_piecewise_mode_without_level_3_fails_vllms_assert(version, text):
    """0.10.1-0.11.2 (VllmConfig.__post_init__): a piecewise cudagraph_mode given with a
    compilation level other than 3 stops vLLM; 0.12+ turns the mode off instead (above),
    --enforce-eager sets the mode to NONE first, FULL needs no piecewise compilation."""
    s = S(cudagraph_mode=PW, compilation_mode=0, max_model_len=4096)
    with pytest.raises(UsageError) as exc:
        plan(llama31_8b(), s, H100, vllm_version=version)
    assert text in str(exc.value)
    for ok in (s.with_(enforce_eager=True), s.with_(cudagraph_mode="FULL"),
               s.with_(compilation_mode=3), s.with_(compilation_mode=None)):
        assert plan(llama31_8b(), ok, H100, vllm_version=version).outcome.ok
    assert plan(llama31_8b(), s, H100, vllm_version="0.12.0").outcome.ok
