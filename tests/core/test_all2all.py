"""Data parallelism's MoE all-to-all by release (core/all2all.py): the backend vLLM runs,
whether each rank's MoE layers see every DP rank's tokens, DeepEP's buffers and the
batched-DP default (config/parallel.py, envs.py, device_communicators/all2all.py,
engine/arg_utils.py; DeepEP's LowLatencyLayout)."""

import pytest

from vramguard.core.all2all import (all2all_backend, batched_dp_moe, dp_moe,
                                    low_latency_rdma_bytes)
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.rules import resolve_rules
from vramguard.core.rules_env import apply_env
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

H200 = lookup_gpu("H200")
EP8 = Settings(max_model_len=8192, data_parallel_size=8, enable_expert_parallel=True)


def _v3():
    from vramguard.sources.resolve import load_model_spec
    return load_model_spec("deepseek-ai/DeepSeek-V3", offline=True)


def _rules(version, env=None):
    return apply_env(resolve_rules(version, "v1"), env)


def deepep_buffer_bytes(spec, s, rules, tokens):
    return dp_moe(spec, s, rules, tokens).deepep_bytes


def dp_gather_ranks(spec, s, rules):
    return dp_moe(spec, s, rules, 8192).gather_ranks


def test_the_backend_by_release_flag_and_variable():
    """The default (naive 0.9.0-0.10.x, allgather_reducescatter from 0.11.0); the variable is
    the only way up to 0.11.0, a fallback for the flag in 0.11.1-0.13, overrides it in 0.14,
    and is gone from 0.15."""
    env = {"VLLM_ALL2ALL_BACKEND": "deepep_low_latency"}
    flag = Settings(all2all_backend="pplx")
    assert all2all_backend(Settings(), _rules("0.8.5")) is None
    assert all2all_backend(Settings(), _rules("0.10.1")) == "naive"
    assert all2all_backend(Settings(), _rules("0.11.0")) == "allgather_reducescatter"
    assert all2all_backend(Settings(), _rules("0.10.1", env)) == "deepep_low_latency"
    assert all2all_backend(flag, _rules("0.13.0", env)) == "pplx"
    assert all2all_backend(Settings(), _rules("0.13.0", env)) == "deepep_low_latency"
    assert all2all_backend(flag, _rules("0.14.0", env)) == "deepep_low_latency"
    assert all2all_backend(Settings(), _rules("0.16.0", env)) == "allgather_reducescatter"


def test_low_latency_rdma_buffer_by_hand():
    """DeepSeek-V3 (hidden 7,168: 56 scales; 256 experts), 256 tokens per rank: dispatch
    message 16 + 14,336 = 14,352 B, combine 224 + 14,336 = 14,560 B; send and receive
    buffers 256 x 256 x 14,560 each, twice; signalling 2 x 1,024; + 128 rounded down to 128."""
    send = recv = 256 * 256 * 14560
    total = 2 * (send + recv + 1024)
    assert low_latency_rdma_bytes(256, 7168, 256) == (total + 128) // 128 * 128 == 3_816_818_816


def test_deepep_buffers_by_backend_and_release():
    """High throughput: the NVLink buffer (1 GiB; VLLM_DEEPEP_BUFFER_SIZE_MB from 0.11). Low
    latency adds the RDMA buffer for 256 tokens per rank up to 0.19, the batched tokens from
    0.20. Only with expert parallelism and DP > 1, from 0.9.1 (DeepEP's managers)."""
    v3 = _v3()
    ht, ll = (EP8.with_(all2all_backend=b) for b in ("deepep_high_throughput",
                                                     "deepep_low_latency"))
    assert deepep_buffer_bytes(v3, ht, _rules("0.19.0"), 8192) == 1 << 30
    mb = {"VLLM_DEEPEP_BUFFER_SIZE_MB": "512"}
    assert deepep_buffer_bytes(v3, ht, _rules("0.19.0", mb), 8192) == 512 << 20
    assert deepep_buffer_bytes(v3, ht, _rules("0.10.1", {**mb, "VLLM_ALL2ALL_BACKEND":
                                                          "deepep_high_throughput"}),
                               8192) == 1 << 30
    assert deepep_buffer_bytes(v3, ll, _rules("0.19.0"), 8192) == (1 << 30) + 3_816_818_816
    assert deepep_buffer_bytes(v3, ll, _rules("0.20.0"), 128) == (
        (1 << 30) + low_latency_rdma_bytes(128, 7168, 256))
    assert deepep_buffer_bytes(v3, ht.with_(enable_expert_parallel=False), _rules("0.19.0"),
                               8192) == 0
    assert deepep_buffer_bytes(v3, ht, _rules("0.9.0", {"VLLM_ALL2ALL_BACKEND":
                                                         "deepep_high_throughput"}), 8192) == 0


def test_only_a_gathering_dispatch_multiplies_the_moe_tokens():
    """With expert parallelism an all-to-all kernel backend sends each rank the tokens routed
    to its experts; without EP vLLM gathers whatever the backend says."""
    v3 = _v3()
    assert dp_gather_ranks(v3, EP8, _rules("0.33.0")) == 8
    ht = EP8.with_(all2all_backend="deepep_high_throughput")
    assert dp_gather_ranks(v3, ht, _rules("0.33.0")) == 1
    assert dp_gather_ranks(v3, ht.with_(enable_expert_parallel=False), _rules("0.33.0")) == 8


def test_batched_dp_default_and_its_refusal_from_0_20():
    """0.20+: DeepEP low latency with EP and DP > 1 sets max_num_batched_tokens to 256 by
    default; with an explicit --max-num-seqs 1024 vLLM's SchedulerConfig then refuses."""
    v3 = _v3()
    ll = EP8.with_(all2all_backend="deepep_low_latency")
    assert batched_dp_moe(ll, _rules("0.20.0")) and not batched_dp_moe(ll, _rules("0.19.0"))
    p = plan(v3, ll, H200, vllm_version="0.20.0")
    assert p.settings["max_num_batched_tokens"] == 256
    assert plan(v3, ll, H200, vllm_version="0.19.0").settings["max_num_batched_tokens"] != 256
    with pytest.raises(UsageError) as e:
        plan(v3, ll.with_(max_num_seqs=1024), H200,
             vllm_version="0.20.0")
    assert e.value.what.startswith("max_num_batched_tokens (256) must be greater than or "
                                   "equal to max_num_seqs (1024).")


def test_the_flag_and_its_choices_by_release():
    v3 = _v3()
    with pytest.raises(UsageError) as e:
        plan(v3, EP8.with_(all2all_backend="mori"), H200, vllm_version="0.14.0")
    assert "argument --all2all-backend: invalid choice: 'mori'" in e.value.what
    plan(v3, EP8.with_(all2all_backend="mori"), H200, vllm_version="0.16.0")
    with pytest.raises(UsageError) as e:
        plan(v3, EP8.with_(all2all_backend="naive"), H200, vllm_version="0.11.0")
    assert "unrecognized arguments: --all2all-backend naive" in e.value.what


def test_the_plan_counts_them_and_says_so():
    v3 = _v3()
    base = plan(v3, EP8, H200, vllm_version="0.19.0")
    ht = plan(v3, EP8.with_(all2all_backend="deepep_high_throughput"), H200,
              vllm_version="0.19.0")
    assert ht.tightest.non_torch.value_bytes - base.tightest.non_torch.value_bytes == 1 << 30
    assert ht.tightest.activation.value_bytes < base.tightest.activation.value_bytes
    assert any("DeepEP's buffers (deepep_high_throughput), ~1.00 GiB per rank" in a
               for a in ht.assumptions)
    assert any("run on the tokens of all 8 DP ranks" in a for a in base.assumptions)


def test_a_pasted_variable_reaches_the_plan():
    """`VLLM_ALL2ALL_BACKEND=deepep_high_throughput vllm serve …` on 0.10.1 (the variable is
    the only way there): the NVLink buffer in non-torch memory, no DP gather."""
    v3 = _v3()
    env = {"VLLM_ALL2ALL_BACKEND": "deepep_high_throughput"}
    base = plan(v3, EP8, H200, vllm_version="0.10.1")
    ht = plan(v3, EP8, H200, vllm_version="0.10.1", env=env)
    assert ht.tightest.non_torch.value_bytes - base.tightest.non_torch.value_bytes == 1 << 30
    assert ht.tightest.activation.value_bytes < base.tightest.activation.value_bytes


def test_the_settings_echo_the_backend_and_where_it_came_from():
    v3 = _v3()
    p = plan(v3, EP8, H200, vllm_version="0.33.0")
    assert (p.settings["all2all_backend"], p.settings_sources["all2all_backend"]) == (
        "allgather_reducescatter", "vllm_default")
    p = plan(v3, EP8, H200, vllm_version="0.10.1", env={"VLLM_ALL2ALL_BACKEND": "pplx"})
    assert (p.settings["all2all_backend"], p.settings_sources["all2all_backend"]) == (
        "pplx", "derived")
    p = plan(v3, EP8.with_(all2all_backend="naive"), H200, vllm_version="0.33.0")
    assert (p.settings["all2all_backend"], p.settings_sources["all2all_backend"]) == (
        "naive", "user")
    assert p.settings["lora_dtype"] == "auto"


def test_deepep_buffer_size_variable_is_read_as_vllm_reads_it():
    """VLLM_DEEPEP_BUFFER_SIZE_MB (0.11+) goes through int() when DeepEP's managers are made:
    a non-integer stops the launch there, in int()'s words; without DeepEP it is never read."""
    v3 = _v3()
    ht = EP8.with_(all2all_backend="deepep_high_throughput")
    with pytest.raises(UsageError) as e:
        plan(v3, ht, H200, vllm_version="0.19.0", env={"VLLM_DEEPEP_BUFFER_SIZE_MB": "1g"})
    assert e.value.what == "invalid literal for int() with base 10: '1g'"
    plan(v3, EP8, H200, vllm_version="0.19.0", env={"VLLM_DEEPEP_BUFFER_SIZE_MB": "1g"})
    p = plan(v3, ht, H200, vllm_version="0.19.0", env={"VLLM_DEEPEP_BUFFER_SIZE_MB": " 2048"})
    base = plan(v3, ht, H200, vllm_version="0.19.0")
    assert p.tightest.non_torch.value_bytes - base.tightest.non_torch.value_bytes == 1 << 30
