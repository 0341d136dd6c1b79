"""Builders of synthetic model files for the sources tests (no network, tiny sizes)."""
import json
import struct
import zipfile
from pathlib import Path

import numpy as np

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "configs"


def load_config(folder: str) -> dict:
    """The config.json of tests/data/configs/<org>__<name>/."""
    return json.loads((CONFIGS / folder / "config.json").read_text())

TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 32, "max_position_embeddings": 2048,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def tiny_tensors(dtype=np.float16) -> dict:
    """The tensors of TINY_LLAMA, named as in a HF checkpoint."""
    h, i, v, kv = 64, 128, 32, 32
    out = {"model.embed_tokens.weight": np.zeros((v, h), dtype), "lm_head.weight": np.zeros((v, h), dtype),
           "model.norm.weight": np.zeros((h,), dtype)}
    for n in range(2):
        p = f"model.layers.{n}."
        out.update({p + "self_attn.q_proj.weight": np.zeros((h, h), dtype),
                    p + "self_attn.k_proj.weight": np.zeros((kv, h), dtype),
                    p + "self_attn.v_proj.weight": np.zeros((kv, h), dtype),
                    p + "self_attn.o_proj.weight": np.zeros((h, h), dtype),
                    p + "mlp.gate_proj.weight": np.zeros((i, h), dtype),
                    p + "mlp.up_proj.weight": np.zeros((i, h), dtype),
                    p + "mlp.down_proj.weight": np.zeros((h, i), dtype),
                    p + "input_layernorm.weight": np.zeros((h,), dtype),
                    p + "post_attention_layernorm.weight": np.zeros((h,), dtype)})
    return out


def write_model_folder(folder: Path, *, shards: int = 2, config: dict | None = None) -> dict:
    """config.json + sharded safetensors + index; returns the tensors written."""
    from safetensors.numpy import save_file
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or TINY_LLAMA))
    tensors = tiny_tensors()
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        part = {n: tensors[n] for n in names[s::shards]}
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, str(folder / fname))
        weight_map.update({n: fname for n in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": sum(t.nbytes for t in tensors.values())},
         "weight_map": weight_map}))
    return tensors


def raw_safetensors(header: dict | bytes, data: bytes = b"", *, length: int | None = None) -> bytes:
    """Hand-made safetensors bytes (for malformed headers)."""
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    n = len(body) if length is None else length
    return struct.pack("<Q", n) + body + data


def write_gguf(path: Path, *, arch: str = "llama", quantized: bool = True) -> None:
    """A tiny GGUF: 1 block, F16 embedding, Q8_0 (or F16) attention weight."""
    import gguf
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("tiny-gguf")
    w.add_block_count(1)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_context_length(4096)
    w.add_token_list([f"t{i}" for i in range(32)])
    w.add_tensor("token_embd.weight", np.zeros((32, 64), dtype=np.float16))
    if quantized:
        w.add_tensor("blk.0.attn_q.weight", np.zeros((64, 68), dtype=np.uint8),
                     raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    else:
        w.add_tensor("blk.0.attn_q.weight", np.zeros((64, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_torch_zip(path: Path, storages: list[int]) -> None:
    """A zip laid out like torch.save output (never unpickled by vramguard)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00.")      # an empty dict pickle
        for i, n in enumerate(storages):
            zf.writestr(f"archive/data/{i}", b"\x00" * n)
        zf.writestr("archive/version", b"3\n")
