"""Build a tiny random-weight Llama for the real-vLLM CPU integration tests.

Run with the vLLM venv's interpreter (it has torch, transformers and tokenizers):

    .venv-vllm/bin/python tests/integration/make_tiny_llama.py [OUT_DIR]

OUT_DIR defaults to `.cache/tiny-llama/` (git-ignored). The model is deterministic (seeded
weights, a byte-level BPE tokenizer trained on a generated corpus) and fits vLLM's CPU
attention: head_dim 32 (the CPU backend rejects head_dim < 32 on the first request).
Shape: 2 layers, hidden 64, 2 attention heads, 2 KV heads, vocab 512, bf16 safetensors, so
KV bytes per token = 2 layers x 2 (K,V) x 2 heads x 32 x 2 B = 512 B and one 128-token CPU
block is 65,536 B. Idempotent: an existing complete OUT_DIR with the same recipe is kept.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

RECIPE_VERSION = 1
VOCAB_SIZE = 512
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
WORDS = ("memory cache block token model server request queue batch layer head vector gpu "
         "kernel page tensor weight prompt reply stream graph float bytes load alert watch "
         "the a of to and in is for on with that by this as at from it be are was").split()
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<s>' + message['role'] + ': ' + message['content'] + '</s>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<s>assistant: ' }}{% endif %}"
)
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "generation_config.json")


def corpus(n_lines: int = 2000, seed: int = 0) -> list[str]:
    """A generated, seeded text corpus for the tokenizer trainer."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 16))]
        words += [str(rng.randint(0, 9999))]
        lines.append(" ".join(words) + rng.choice([".", "!", "?", ","]))
    return lines


def build_tokenizer(out: Path) -> None:
    """Train a byte-level BPE (any text encodes) and save it as a fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
        pad_token="<pad>", model_max_length=256)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def build_model(out: Path, vocab_size: int) -> None:
    """A seeded random LlamaForCausalLM saved as bf16 safetensors."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, head_dim=32,
        max_position_embeddings=512, bos_token_id=1, eos_token_id=2, pad_token_id=3,
        tie_word_embeddings=False, torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    model.save_pretrained(out, safe_serialization=True)


def is_complete(out: Path) -> bool:
    """True when `out` holds a model built by this recipe version."""
    stamp = out / "vramguard-recipe.json"
    if not stamp.is_file() or not all((out / name).is_file() for name in FILES):
        return False
    return json.loads(stamp.read_text()).get("recipe_version") == RECIPE_VERSION


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[2]
    out = Path(argv[0]) if argv else root / ".cache" / "tiny-llama"
    if is_complete(out):
        print(f"make_tiny_llama: {out} ready")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    from transformers import AutoTokenizer
    vocab = len(AutoTokenizer.from_pretrained(out))
    build_model(out, vocab)
    (out / "vramguard-recipe.json").write_text(json.dumps(
        {"recipe_version": RECIPE_VERSION, "vocab_size": vocab}) + "\n")
    print(f"make_tiny_llama: built {out} (vocab {vocab})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
