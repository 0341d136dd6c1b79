"""LoRAConfig's checks by release (config.py / config/lora.py, 0.4.0-0.33.0), in vLLM's words,
and --fully-sharded-loras / --lora-extra-vocab-size in the slot bytes."""

import pytest

from core_specs import llama31_8b
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

H100 = lookup_gpu("H100-80GB")
LORA = Settings(max_model_len=8192, enable_lora=True)


def refusal(version, s, engine=None):
    """vLLM's words (the error's `what`, without vramguard's fix)."""
    with pytest.raises(UsageError) as exc:
        plan(llama31_8b(), s, H100, vllm_version=version, engine=engine)
    return exc.value.what


def test_rank_choices_by_release():
    assert "max_lora_rank (128) must be one of (8, 16, 32, 64)." in refusal(
        "0.5.4", LORA.with_(max_lora_rank=128))
    plan(llama31_8b(), LORA.with_(max_lora_rank=128), H100, vllm_version="0.5.5")
    assert "must be one of (8, 16, 32, 64, 128, 256, 320, 512)." in refusal(
        "0.11.0", LORA.with_(max_lora_rank=24))
    # 0.11.1+: argparse's choices, LoRA on or not
    text = refusal("0.27.1", Settings(max_model_len=8192, max_lora_rank=24))
    assert ("argument --max-lora-rank: invalid choice: 24 (choose from 1, 8, 16, 32, 64, 128, "
            "256, 320, 512)") in text


def test_cpu_loras_extra_vocab_chunked_prefill_and_offload():
    assert "max_cpu_loras (2) must be >= max_loras (4)" in refusal(
        "0.10.1", LORA.with_(max_loras=4, max_cpu_loras=2))
    assert refusal("0.13.0", LORA.with_(max_loras=4, max_cpu_loras=2)).endswith("(4)")
    assert refusal("0.14.0", LORA.with_(max_loras=4, max_cpu_loras=2)).endswith(
        "max_cpu_loras (2) must be >= max_loras (4).")
    assert "lora_extra_vocab_size (0) must be one of (256, 512)." in refusal(
        "0.8.5", LORA.with_(lora_extra_vocab_size=0))
    assert "LoRA is not supported with chunked prefill yet." in refusal(
        "0.6.0", LORA.with_(enable_chunked_prefill=True))
    plan(llama31_8b(), LORA.with_(enable_chunked_prefill=True), H100, vllm_version="0.6.5")
    assert "CPU offload is not supported with LoRA yet." in refusal(
        "0.7.3", LORA.with_(cpu_offload_gb=4))
    assert "V0 LoRA does not support CPU offload, please use V1." in refusal(
        "0.9.2", LORA.with_(cpu_offload_gb=4), engine="v0")
    plan(llama31_8b(), LORA.with_(cpu_offload_gb=4), H100, vllm_version="0.9.2", engine="v1")


def test_batched_token_cap_of_the_lora_kernel_before_0_5_5():
    """0.4.0-0.5.4: v0 without chunked prefill batches max(max_model_len, 2048) tokens;
    LoRA's kernel takes at most 65,528."""
    long = Settings(enable_lora=True)            # Llama-3.1-8B: 131,072 tokens
    assert "max_num_batched_tokens must be <= 65528 when LoRA is enabled." in refusal(
        "0.5.4", long)
    plan(llama31_8b(), long.with_(max_model_len=32768), H100, vllm_version="0.5.4")
    plan(llama31_8b(), long, H100, vllm_version="0.5.5")


def test_fully_sharded_loras_split_every_linear_slot_over_tp():
    """Llama-3.1-8B, TP 2, 4 slots of rank 64 (bf16): (3h + q + kv + q + h) / 2 + (2h + 3i
    + h) / 2 per layer and unit rank, 32 layers; the embedding / LM-head slots stay whole."""
    from vramguard.core.weights import LoraRules, lora_bytes
    h, q, kv, i = 4096, 4096, 2048, 14336
    s = Settings(enable_lora=True, max_loras=4, max_lora_rank=64, tensor_parallel_size=2)
    full = s.with_(fully_sharded_loras=True)
    per_layer = (3 * h + q + kv + q + h) / 2 + (2 * h + 2 * i + i + h) / 2
    assert lora_bytes(llama31_8b(), full, 2) == int(4 * 64 * per_layer * 32 * 2)
    assert lora_bytes(llama31_8b(), full, 2) < lora_bytes(llama31_8b(), s, 2)
    rules = LoraRules(extra_vocab=256, embedding_archs=frozenset({"LlamaForCausalLM"}))
    bigger = lora_bytes(llama31_8b(), s.with_(lora_extra_vocab_size=512), 2, rules)
    assert bigger > lora_bytes(llama31_8b(), s, 2, rules)


def test_v0_0_7_keeps_the_lora_slots_outside_the_budget():
    """v0 0.7.0-0.7.3 create the slots after measuring the weights and before the profile's
    baseline: the KV pool is the one without LoRA, and the plan says the slots sit outside
    gpu_memory_utilization; 0.6.6 and 0.8.0 count them."""
    s = Settings(max_model_len=8192, enable_lora=True, max_loras=4, max_lora_rank=64)
    bare = Settings(max_model_len=8192)

    def kv(version, settings):
        p = plan(llama31_8b(), settings, H100, vllm_version=version, engine="v0")
        return p.tightest.kv_cache.value_bytes, p
    k_lora, p = kv("0.7.3", s)
    assert k_lora == kv("0.7.3", bare)[0]
    assert any("outside gpu_memory_utilization" in a and "LoRA" in a for a in p.assumptions)
    for version in ("0.6.6", "0.8.0"):
        assert kv(version, s)[0] < kv(version, bare)[0]


def test_lora_graph_cases_by_release_and_specialize_active_lora():
    """Each graph size is captured once without LoRA (and before 0.11.1), twice with it
    (with and without active adapters), and with --specialize-active-lora (0.16+) once more
    per captured adapter count: powers of 2 up to max_loras and max_loras + 1
    (lora/utils.py get_captured_lora_counts): 4 adapters -> 1, 2, 4, 5 -> 5 cases."""
    from vramguard.core.rules import resolve_rules
    from vramguard.core.stage_terms import lora_graph_cases
    lora = Settings(enable_lora=True, max_loras=4)
    assert lora_graph_cases(lora, resolve_rules("0.11.0")) == 1
    assert lora_graph_cases(lora, resolve_rules("0.20.0")) == 2
    spec = lora.with_(specialize_active_lora=True)
    assert lora_graph_cases(spec, resolve_rules("0.20.0")) == 5
    assert lora_graph_cases(spec.with_(max_loras=64), resolve_rules("0.20.0")) == 1 + 8
    assert lora_graph_cases(Settings(), resolve_rules("0.20.0")) == 1



def test_lora_dtype_sets_the_slot_bytes_and_its_choices_by_release():
    """--lora-dtype (LoRAConfig.lora_dtype): auto is the model dtype; float32 doubles the
    bf16 slots and is one of argparse's choices up to 0.6.4 only (engine/arg_utils.py)."""
    from vramguard.core.weights import lora_bytes
    spec = llama31_8b()
    s = LORA.with_(max_loras=4)
    bf16 = lora_bytes(spec, s, 2)
    assert lora_bytes(spec, s.with_(lora_dtype="auto"), 2) == bf16
    assert lora_bytes(spec, s.with_(lora_dtype="float16"), 2) == bf16
    assert lora_bytes(spec, s.with_(lora_dtype="float32"), 2) == 2 * bf16
    w = {d: plan(spec, s.with_(lora_dtype=d), H100, vllm_version="0.6.4")
         .tightest.weights.value_bytes for d in ("auto", "float32")}
    from vramguard.core.rules import resolve_rules
    from vramguard.core.weights import LoraRules
    r = resolve_rules("0.6.4", "v0")
    rules = LoraRules(r.lora_moe, r.lora_extra_vocab, r.lora_tied_double, r.lora_embedding_archs,
                      r.lora_outside_budget)
    assert w["float32"] - w["auto"] == lora_bytes(spec, s, 2, rules)    # the 16-bit slots again
    assert refusal("0.6.5", s.with_(lora_dtype="float32")) == (
        "vllm serve: error: argument --lora-dtype: invalid choice: 'float32' "
        "(choose from 'auto', 'float16', 'bfloat16')")
    plan(spec, s.with_(lora_dtype="bfloat16"), H100, vllm_version="0.33.0")
