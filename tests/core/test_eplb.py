"""Expert-parallel load balancing (EPLB): its redundant experts, its working set and where
vLLM counts it, and ParallelConfig's checks by release (config.py / config/parallel.py)."""

import pytest

from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.settings import Settings
from vramguard.core.weights import eplb_buffer_bytes, weights_per_rank
from vramguard.errors import UsageError

H100 = lookup_gpu("H100-80GB")
EP = Settings(max_model_len=4096, tensor_parallel_size=2, enable_expert_parallel=True)


def _mixtral():
    from vramguard.sources.resolve import load_model_spec
    return load_model_spec("mistralai/Mixtral-8x7B-Instruct-v0.1", offline=True)


def test_redundant_experts_add_whole_experts_per_rank():
    """8 experts + 2 redundant over EP = 2 ranks: 5 physical experts per rank instead of 4;
    without --enable-eplb the redundant count plays no part."""
    mix = _mixtral()
    experts = sum(l.params.experts for l in mix.layers)      # all experts, all layers
    base = weights_per_rank(mix, EP)[0].params
    eplb = weights_per_rank(mix, EP.with_(enable_eplb=True, num_redundant_experts=2))[0].params
    assert eplb - base == experts // 8
    assert weights_per_rank(mix, EP.with_(num_redundant_experts=2))[0].params == base


def test_working_set_is_one_layer_of_local_experts_and_the_maps():
    """eplb_state.py: one MoE layer's local experts again (5 of 8, bf16), an int64 map of
    32 layers x 8 experts x 1,024 slots and an int32 window of 1,000 x 32 x 10 physical."""
    mix = _mixtral()
    s = EP.with_(enable_eplb=True, num_redundant_experts=2)
    one_layer = max(l.params.experts for l in mix.layers)
    want = int(one_layer * 5 / 8 * 2) + 32 * 8 * 1024 * 8 + 1000 * 32 * 10 * 4
    assert eplb_buffer_bytes(mix, s, 2) == want
    assert eplb_buffer_bytes(mix, EP, 2) == 0


def test_where_the_working_set_is_counted_by_release():
    """0.9.2-0.11: in the profile run's peak; 0.12-0.19: allocated after the weights are
    measured (outside the budget, so the KV pool does not shrink); 0.20+: in the weights."""
    mix = _mixtral()
    s = EP.with_(enable_eplb=True)
    extra = eplb_buffer_bytes(mix, s, 2)

    def terms(version, settings):
        t = plan(mix, settings, H100, vllm_version=version).tightest
        return t.weights.value_bytes, t.activation.value_bytes

    w0, a0 = terms("0.11.0", EP)
    w1, a1 = terms("0.11.0", s)
    assert w1 == w0 and abs(a1 - a0 - extra) <= 1
    assert terms("0.14.0", s) == terms("0.14.0", EP)
    w0, a0 = terms("0.20.0", EP)
    w1, a1 = terms("0.20.0", s)
    assert abs(w1 - w0 - extra) <= 1 and a1 == a0


def _refusal(settings, version):
    with pytest.raises(UsageError) as exc:
        plan(_mixtral(), settings, H100, vllm_version=version)
    return exc.value.what


def test_checks_by_release():
    """Redundant experts need EPLB (0.9.2, reworded 0.10.2); from 0.10 EPLB needs expert
    parallelism and TP x DP > 1."""
    no_eplb = EP.with_(num_redundant_experts=4)
    assert _refusal(no_eplb, "0.9.2") == "num_redundant_experts should be used with EPLB.4."
    assert _refusal(no_eplb, "0.11.0") == ("num_redundant_experts is set to 4 but EPLB is not "
                                           "enabled. Either enable EPLB or unset "
                                           "num_redundant_experts.")
    no_ep = EP.with_(enable_eplb=True, enable_expert_parallel=False)
    plan(_mixtral(), no_ep, H100, vllm_version="0.9.2")
    assert _refusal(no_ep, "0.10.0") == "enable_expert_parallel must be True to use EPLB."
    one = Settings(max_model_len=4096, enable_expert_parallel=True, enable_eplb=True)
    assert _refusal(one, "0.20.0") == ("EPLB requires tensor_parallel_size or "
                                       "data_parallel_size to be greater than 1, but got "
                                       "TP=1,DP=1.")
    assert "unrecognized arguments: --enable-eplb" in _refusal(EP.with_(enable_eplb=True),
                                                               "0.8.5")


def test_flags_parse():
    """--enable-eplb, --num-redundant-experts (0.9.2-0.11) and --eplb-config's JSON."""
    from vramguard.sources.vllm_args import parse_vllm_command
    cmd = ("vllm serve m --enable-expert-parallel --enable-eplb "
           "--eplb-config '{\"num_redundant_experts\": 32, \"window_size\": 1000}'")
    s = parse_vllm_command(cmd).settings
    assert s.enable_eplb and s.num_redundant_experts == 32
    s = parse_vllm_command("vllm serve m --enable-eplb --num-redundant-experts 8").settings
    assert s.num_redundant_experts == 8
