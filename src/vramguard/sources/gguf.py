"""GGUF files -> ModelSpec + CheckpointInfo (exact bytes by ggml type).

The header (metadata key/values and tensor infos) is parsed here with bounded reads, so a
truncated or hostile file is a SourceError, never a huge allocation; tensor data is never
read. The `gguf` package (imported lazily, only here) supplies the block sizes of the ggml
quantization types (`gguf.GGML_QUANT_SIZES`) and their names.
"""

from __future__ import annotations

import dataclasses
import os
import re
import struct
from pathlib import Path
from typing import BinaryIO

from ..core.model import CheckpointInfo, ModelSpec, QuantSpec
from ..core.provenance import Source
from ..errors import SourceError
from .config import spec_from_config

_FIX = "Check or re-download the .gguf file"
_MAX_COUNT = 1 << 24
_MAX_STR = 64 << 20
_KEEP_ARRAY = 4096                       # longer arrays keep only their length
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
           11: "<q", 12: "<d"}
# GGUF architecture name -> Hugging Face model_type.
_ARCH = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "qwen3": "qwen3",
         "qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gemma": "gemma", "gemma2": "gemma2",
         "gemma3": "gemma3_text", "phi3": "phi3", "deepseek2": "deepseek_v3", "granite": "granite",
         "granitemoe": "granitemoe", "gpt-oss": "gpt_oss", "starcoder2": "starcoder2",
         "command-r": "cohere", "cohere2": "cohere2", "glm4": "glm4", "glm4moe": "glm4_moe",
         "olmo2": "olmo2", "exaone": "exaone", "mixtral": "mixtral", "phi2": "phi"}


@dataclasses.dataclass
class GgufHeader:
    metadata: dict
    tensors: list[tuple[str, tuple[int, ...], int, int]]   # name, shape, ggml type, offset
    data_start: int
    file_size: int


class _Reader:
    def __init__(self, fh: BinaryIO, size: int, where: str):
        self.fh, self.size, self.where, self.pos = fh, size, where, 0

    def read(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.size:
            raise SourceError(f"GGUF header runs past the end of the file (at byte {self.pos})",
                              where=self.where, fix=_FIX)
        data = self.fh.read(n)
        if len(data) != n:
            raise SourceError("GGUF file is truncated", where=self.where, fix=_FIX)
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > self.size:
            raise SourceError("GGUF header runs past the end of the file", where=self.where, fix=_FIX)
        self.fh.seek(n, os.SEEK_CUR)
        self.pos += n

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def count(self, what: str, limit: int = _MAX_COUNT) -> int:
        n = self.unpack("<Q")
        if n > limit:
            raise SourceError(f"GGUF {what} count {n} is implausible", where=self.where, fix=_FIX)
        return n

    def string(self) -> str:
        return self.read(self.count("string length", _MAX_STR)).decode("utf-8", "replace")

    def value(self, vtype: int, depth: int = 0):
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9 and depth < 2:
            itype = self.unpack("<I")
            n = self.count("array")
            if itype in _SCALAR and itype != 8 and n > _KEEP_ARRAY:
                self.skip(n * struct.calcsize(_SCALAR[itype]))
                return _Len(n)
            items = [self.value(itype, depth + 1) for _ in range(n)]
            return _Len(n) if n > _KEEP_ARRAY else items
        if vtype == 9:
            raise SourceError("GGUF metadata nests arrays more than 2 deep", where=self.where,
                              fix=_FIX)
        raise SourceError(f"GGUF metadata has unknown value type {vtype}", where=self.where, fix=_FIX)


class _Len(int):
    """Stands for a long array whose items were skipped (only the length is kept)."""


def read_header(path: str | os.PathLike) -> GgufHeader:
    """Parse a GGUF file's metadata and tensor infos (never tensor data)."""
    where = str(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            return _parse(_Reader(fh, size, where))
    except OSError as exc:
        raise SourceError(f"cannot read GGUF file ({exc.strerror or exc})", where=where,
                          fix="Check the path and its permissions") from None


def _parse(r: _Reader) -> GgufHeader:
    magic = r.read(4) if r.size >= 4 else b""
    if magic != b"GGUF":
        raise SourceError("not a GGUF file (no GGUF magic)", where=r.where,
                          fix="Pass a .gguf file, a model folder or config.json")
    if r.size < 24:
        raise SourceError(f"truncated GGUF file ({r.size} bytes, no header)", where=r.where,
                          fix="Download the file again")
    version = r.unpack("<I")
    if version not in (2, 3):
        raise SourceError(f"unsupported GGUF version {version}", where=r.where,
                          fix="Convert the file with a current llama.cpp")
    n_tensors, n_kv = r.count("tensor"), r.count("metadata")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.unpack("<I"))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.unpack("<I")
        if n_dims > 8:
            raise SourceError(f"GGUF tensor {name!r:.60} has {n_dims} dimensions", where=r.where, fix=_FIX)
        shape = tuple(r.unpack("<Q") for _ in range(n_dims))
        tensors.append((name, shape, r.unpack("<I"), r.unpack("<Q")))
    align = meta.get("general.alignment", 32)
    if not isinstance(align, int) or isinstance(align, bool) or not 0 < align <= 1 << 20:
        align = 32
    start = -(-r.pos // align) * align
    return GgufHeader(metadata=meta, tensors=tensors, data_start=start, file_size=r.size)


def tensor_bytes(header: GgufHeader, where: str) -> tuple[dict[str, int], dict[str, int], int]:
    """(bytes by ggml type name, bytes by tensor name, number of elements); checks offsets."""
    import gguf                                               # NOTE: the only gguf import
    by_type: dict[str, int] = {}
    by_name: dict[str, int] = {}
    elements = 0
    for name, shape, ttype, offset in header.tensors:
        try:
            qtype = gguf.GGMLQuantizationType(ttype)
            block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise SourceError(f"GGUF tensor {name!r:.60} has unknown ggml type {ttype}",
                              where=where, fix="Update the gguf package (pip install -U gguf)") from None
        numel = 1
        for d in shape:
            numel *= d
        if numel > 1 << 48 or (shape and shape[0] % block):
            raise SourceError(f"GGUF tensor {name!r:.60} has a bad shape {shape}", where=where, fix=_FIX)
        nbytes = numel // block * type_size
        if header.data_start + offset + nbytes > header.file_size:
            raise SourceError(f"GGUF tensor {name!r:.60} lies past the end of the file",
                              where=where, fix="The file is truncated: re-download it")
        by_type[qtype.name] = by_type.get(qtype.name, 0) + nbytes
        by_name[name] = nbytes
        elements += numel
    return by_type, by_name, elements


def config_from_metadata(meta: dict, where: str) -> dict:
    """A config.json-like dict from GGUF metadata (llama.cpp key names)."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise SourceError("GGUF file has no general.architecture", where=where, fix=_FIX)

    def get(key: str, whole: bool = True):
        value = meta.get(f"{arch}.{key}")
        if isinstance(value, list):                           # per-layer values: take the max
            nums = [v for v in value if isinstance(v, (int, float))]
            return max(nums) if nums else None
        return _number(value, f"{arch}.{key}", whole, where)

    tokens = meta.get("tokenizer.ggml.tokens")
    vocab = get("vocab_size") or (int(tokens) if isinstance(tokens, _Len) else
                                  len(tokens) if isinstance(tokens, list) else None)
    cfg = {"model_type": _ARCH.get(arch, arch), "architectures": [f"gguf:{arch}"],
           "hidden_size": get("embedding_length"), "num_hidden_layers": get("block_count"),
           "num_attention_heads": get("attention.head_count"),
           "num_key_value_heads": get("attention.head_count_kv"),
           "intermediate_size": get("feed_forward_length"), "vocab_size": vocab,
           "max_position_embeddings": get("context_length"),
           "sliding_window": get("attention.sliding_window"),
           "num_local_experts": get("expert_count"), "num_experts_per_tok": get("expert_used_count"),
           "moe_intermediate_size": get("expert_feed_forward_length"),
           "n_shared_experts": get("expert_shared_count"),
           "first_k_dense_replace": get("leading_dense_block_count"),
           "kv_lora_rank": get("attention.kv_lora_rank"),
           "q_lora_rank": get("attention.q_lora_rank"),
           "torch_dtype": "bfloat16"}        # NOTE: GGUF has no dtype; vLLM computes in 16-bit
    key_len, value_len = get("attention.key_length"), get("attention.value_length")
    rope = get("rope.dimension_count")
    if cfg["kv_lora_rank"]:
        cfg.update(qk_rope_head_dim=rope, qk_nope_head_dim=(key_len or 0) - (rope or 0) or None,
                   v_head_dim=value_len)
    elif key_len:
        cfg["head_dim"] = key_len
    factor = get("rope.scaling.factor", whole=False)
    if factor:
        cfg["rope_scaling"] = {
            "rope_type": str(meta.get(f"{arch}.rope.scaling.type") or "linear"), "factor": factor,
            "original_max_position_embeddings": get("rope.scaling.original_context_length")}
    return {k: v for k, v in cfg.items() if v is not None}


def _number(value, key: str, whole: bool, where: str):
    """A numeric metadata value (None when absent); SourceError naming the GGUF key else.

    NOTE: the metadata is checked here, before any arithmetic on it, so that a wrong type
    names the GGUF key and the file rather than a config.json field.
    """
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    if ok and whole and isinstance(value, float):
        ok = value not in (float("inf"), float("-inf")) and value == int(value)
    if not ok:
        label = "a whole number" if whole else "a number"
        raise SourceError(f"GGUF key {key} is {value!r:.40}, not {label}", where=where, fix=_FIX)
    return value


def spec_from_gguf(path: str | os.PathLike) -> ModelSpec:
    """A ModelSpec whose checkpoint bytes are the file's exact tensor bytes."""
    where = str(path)
    header = read_header(path)
    by_type, by_name, elements = tensor_bytes(header, where)
    config = config_from_metadata(header.metadata, where)
    has_output = any(n == "output.weight" for n in by_name)
    config.setdefault("tie_word_embeddings", not has_output)
    name = header.metadata.get("general.name")
    spec = _spec_from_metadata(config, name if isinstance(name, str) and name else Path(path).stem,
                               where)
    total = sum(by_type.values())
    checkpoint = CheckpointInfo(format="gguf", total_bytes=total, num_params=elements,
                                bytes_by_dtype=by_type, num_tensors=len(header.tensors), path=where)
    quant = _quant(header, by_name, total, elements)
    notes = spec.notes
    if re.search(r"-\d{5}-of-\d{5}\.gguf$", str(path)):
        notes += ("split GGUF: only this part's tensors are counted (vLLM loads a single merged "
                  ".gguf file: merge the parts with llama.cpp's gguf-split --merge)",)
    return dataclasses.replace(spec, checkpoint=checkpoint, quant=quant, notes=notes,
                               provenance={**spec.provenance, "checkpoint": Source.CHECKPOINT,
                                           "quant": Source.CHECKPOINT,
                                           "torch_dtype": Source.DERIVED})


def _spec_from_metadata(config: dict, name: str, where: str) -> ModelSpec:
    """spec_from_config on the metadata's config, its errors told as GGUF errors.

    NOTE: the config checks speak of config.json fields and fixes; a .gguf has no
    config.json, so the fix is the GGUF one and the message says the value is metadata.
    """
    try:
        return spec_from_config(config, name=name, source_ref=where, origin=Source.CHECKPOINT)
    except SourceError as exc:
        if "config.json" not in (exc.fix or ""):
            raise
        raise SourceError(f"{exc.what} (from the GGUF metadata)", where=exc.where,
                          fix=_FIX) from None


def _quant(header: GgufHeader, by_name: dict[str, int], total: int, elements: int) -> QuantSpec:
    shapes = {n: s for n, s, _, _ in header.tensors}
    numel = {n: _numel(s) for n, s in shapes.items()}
    types = {n: t for n, _, t, _ in header.tensors}
    linear = [n for n in by_name if n.startswith("blk.") and n.endswith(".weight")
              and len(shapes[n]) >= 2]
    lin_bytes = sum(by_name[n] for n in linear)
    lin_elems = sum(numel[n] for n in linear) or 1
    quantized = {0, 1, 30}                                    # F32, F16, BF16 are not quantized
    return QuantSpec(method="gguf", bits=round(total * 8 / max(elements, 1), 3),
                     linear_bytes_per_param=lin_bytes / lin_elems,
                     embedding_quantized=types.get("token_embd.weight", 0) not in quantized,
                     lm_head_quantized=types.get("output.weight", types.get("token_embd.weight", 0))
                     not in quantized)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
