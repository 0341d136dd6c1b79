"""vLLM's LoRAConfig checks, release by release (`rules.lora_*`), in vLLM's words.

The slot buffers themselves are a weights term (`weights.lora_bytes`)."""

from __future__ import annotations

from .errors import UsageError
from .rules import VllmRules
from .settings import Settings

__all__ = ["check_lora", "check_lora_batched_tokens"]


def check_lora(s: Settings, rules: VllmRules) -> None:
    """The rank (argparse's choices from 0.11.1, whether LoRA is on or not), and with
    --enable-lora: the extra vocabulary, max_cpu_loras >= max_loras, chunked prefill
    (0.5.1-0.6.4) and CPU offload (0.7.0+). Raises UsageError."""
    rank, ranks = s.max_lora_rank, rules.lora_ranks
    if rank is not None and rules.lora_rank_argparse and rank not in ranks:
        raise UsageError(f"vllm serve: error: argument --max-lora-rank: invalid choice: {rank} "
                         f"(choose from {', '.join(map(str, ranks))})",
                         where="--max-lora-rank", fix=_rank_fix(rank, ranks))
    if not s.enable_lora:
        return
    if rank is not None and rank not in ranks:
        raise UsageError(f"max_lora_rank ({rank}) must be one of {ranks}.",
                         where="--max-lora-rank", fix=_rank_fix(rank, ranks))
    extra = s.lora_extra_vocab_size
    if extra is not None and extra not in rules.lora_extra_vocab_choices:
        raise UsageError(f"lora_extra_vocab_size ({extra}) must be one of "
                         f"{rules.lora_extra_vocab_choices}.", where="--lora-extra-vocab-size")
    loras = s.max_loras or 1
    if s.max_cpu_loras is not None and s.max_cpu_loras < loras:
        dot = "." if rules.msg_cpu_loras_dot else ""
        raise UsageError(f"max_cpu_loras ({s.max_cpu_loras}) must be >= max_loras ({loras}){dot}",
                         where="--max-cpu-loras", fix=f"Pass --max-cpu-loras {loras} or more")
    _check_lora_flags(s, rules)


def _check_lora_flags(s: Settings, rules: VllmRules) -> None:
    if rules.lora_no_chunked and s.enable_chunked_prefill:
        raise UsageError("LoRA is not supported with chunked prefill yet.",
                         where="--enable-chunked-prefill",
                         fix="Drop --enable-chunked-prefill (or use vLLM 0.6.5+)")
    offload = rules.lora_no_cpu_offload
    if s.cpu_offload_gb and (offload == "any" or (offload == "v0" and rules.engine == "v0")):
        text = ("CPU offload is not supported with LoRA yet." if offload == "any" else
                "V0 LoRA does not support CPU offload, please use V1.")
        raise UsageError(text, where="--cpu-offload-gb",
                         fix="Drop --cpu-offload-gb, or serve the adapters merged")


def check_lora_batched_tokens(s: Settings, rules: VllmRules, tokens: int) -> None:
    """0.4.0-0.5.4: the custom LoRA kernel caps the batched tokens (the effective value,
    which follows max_model_len by default)."""
    cap = rules.lora_max_batched_tokens
    if s.enable_lora and cap is not None and tokens > cap:
        raise UsageError("Due to limitations of the custom LoRA CUDA kernel, "
                         f"max_num_batched_tokens must be <= {cap} when LoRA is enabled.",
                         where="--max-num-batched-tokens",
                         fix=f"Pass --max-model-len {cap} or less (the batched tokens follow "
                             f"it), or --max-num-batched-tokens {cap}")


def _rank_fix(rank: int, ranks: tuple[int, ...]) -> str:
    up = next((r for r in ranks if r >= rank), ranks[-1])
    return f"Pass --max-lora-rank {up} (the adapters' rank or more)"
