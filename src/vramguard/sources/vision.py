"""Parameter counts of vision (and audio) towers and their projectors, from a config.

Exact block formulas for the towers vLLM serves most (Qwen2-VL / Qwen2.5-VL / Qwen3-VL,
SigLIP (Gemma 3), Pixtral (Mistral 3), MoonViT (Kimi-VL), Llama 4, InternViT); other towers
are estimated as a plain ViT (attention 4h^2 + MLP 2*h*i + norms) plus a linear projector.
Published multimodal totals are matched within about 1-2% (vision towers are small next to
the language model; the tests check the totals).
"""

from __future__ import annotations

from ..core.model import VisionSpec
from ._fields import LIMITS, Fields

_NESTED = ("vision_config", "vision_tower_config", "visual")
_AUDIO = ("audio_config",)


def _vit_block(h: int, i: int, *, gated: bool = False, bias: bool = True, ln: bool = True) -> int:
    attn = 4 * h * h + (4 * h if bias else 0)
    mlp = (3 * h * i + (2 * i + h if bias else 0)) if gated else (2 * h * i + (i + h if bias else 0))
    return attn + mlp + (4 * h if ln else 2 * h)


def vision_from_config(top: Fields, text_hidden: int, notes: list[str]) -> VisionSpec | None:
    """The vision/audio tower of a multimodal config, or None for a text-only model."""
    v = None
    for key in _NESTED:
        if isinstance(top.data.get(key), dict):
            v = top.sub(key)
            break
    audio = next((top.sub(k) for k in _AUDIO if isinstance(top.data.get(k), dict)), None)
    if v is None and audio is None:
        return None
    total, hidden, layers, image, patch = 0, None, None, None, None
    if v is not None and _is_mobilenet(v):
        total, hidden = _gemma3n_vision(v, text_hidden)
        image, patch = MOBILENET_V5_IMAGE, MOBILENET_V5_IMAGE // MOBILENET_V5_GRID
    elif v is not None:
        total, hidden, layers = _vision_params(top, v, text_hidden, notes)
        image = v.opt_int("image_size", hi=LIMITS["positions"])
        patch = v.opt_int("patch_size", hi=LIMITS["positions"])
    if audio is not None:
        total += _audio_tower(audio, text_hidden)
        notes.append("audio tower parameters estimated from its size (+/- 10%)")
    tokens, patches = _item_size(top, v, image, patch) if v is not None else (None, None)
    return VisionSpec(num_params=total, hidden_size=hidden, num_layers=layers, image_size=image,
                      patch_size=patch, modalities=_modalities(top, v is not None,
                                                               audio is not None),
                      tokens_per_item=tokens, patches_per_item=patches)


def _item_size(top: Fields, v: Fields, image: int | None,
               patch: int | None) -> tuple[int | None, int | None]:
    """(prompt tokens, encoder patches) of one worst-case image where the config says more
    than the patch grid: Gemma 3's pooled `mm_tokens_per_image` (256 of 4,096 patches,
    gemma3_mm.py), Gemma 4's `vision_soft_tokens_per_image` pooled by `pooling_kernel_size`²,
    Mistral 3's `spatial_merge_size` (pixtral.py: a 28-pixel patch per token)."""
    grid = (image // patch) ** 2 if image and patch else None
    tiles, ratio = _tiles(top, v)
    if tiles and grid:
        return tiles * int(grid * ratio * ratio), tiles * grid
    mm = top.opt_int("mm_tokens_per_image", lo=1, hi=LIMITS["positions"])
    if mm and grid:
        return mm, grid
    soft = top.opt_int("vision_soft_tokens_per_image", lo=1, hi=LIMITS["positions"])
    if soft:
        k = v.int("pooling_kernel_size", default=1, lo=1, hi=64)
        return soft, soft * k * k
    merge = top.opt_int("spatial_merge_size", lo=1, hi=64)
    if merge and image and patch:
        return (image // (patch * merge)) ** 2, grid
    return None, None


# NOTE: Llama 4's image processor splits an image into at most `max_patches` = 16 tiles (its
# preprocessor default, which config.json does not carry) plus a global tile; vLLM's worst
# case is a 16:1 image (mllama4.py `get_image_size_with_most_features`).
LLAMA4_MAX_TILES = 16


def _tiles(top: Fields, v: Fields) -> tuple[int, float]:
    """(tiles of the worst-case image, token ratio after pixel shuffle) of tiling towers:
    InternVL (`max_dynamic_patch` tiles + a thumbnail, `downsample_ratio`), Llama 4 (16 tiles
    + a global one, `pixel_shuffle_ratio`); (0, 1.0) for the others."""
    most = top.opt_int("max_dynamic_patch", lo=1, hi=1024)
    if most:
        thumb = top.bool("use_thumbnail", default=True) and most > 1
        return most + int(thumb), top.float("downsample_ratio", default=0.5) or 0.5
    shuffle = v.float("pixel_shuffle_ratio")
    if (top.str("model_type") or "").startswith("llama4") and shuffle:
        return LLAMA4_MAX_TILES + 1, shuffle
    return 0, 1.0


# NOTE: a config that takes videos names their placeholder token (Qwen2/2.5/3-VL
# `video_token_id`, LLaVA-OneVision `video_token_index`, ...).
_VIDEO_KEYS = ("video_token_id", "video_token_index", "video_token", "video_start_token_id")


def _modalities(top: Fields, vision: bool, audio: bool) -> tuple[str, ...]:
    """The inputs the towers encode (the keys of vLLM's --limit-mm-per-prompt)."""
    out = ["image"] if vision else []
    if vision and any(k in top.data for k in _VIDEO_KEYS):
        out.append("video")
    if audio:
        out.append("audio")
    return tuple(out)


# NOTE: Gemma 3n's vision tower is timm's MobileNetV5-300M encoder, named by the config but not
# described by it (transformers wraps timm): its published size (KerasHub preset
# `mobilenetv5_300m_enc_gemma3n`: 294,284,096 parameters). It takes 768 x 768 images and emits
# a 16 x 16 grid: 256 tokens per image (vLLM gemma3n_mm.py).
MOBILENET_V5_PARAMS = {"mobilenetv5_300m_enc": 294_284_096}
MOBILENET_V5_IMAGE, MOBILENET_V5_GRID = 768, 16


def _is_mobilenet(v: Fields) -> bool:
    return (v.str("model_type") or "").lower() == "gemma3n_vision" or (
        v.str("architecture") or "").startswith("mobilenetv5")


def _gemma3n_vision(v: Fields, text_h: int) -> tuple[int, int]:
    """(parameters, width) of Gemma 3n's MobileNetV5 tower and its multimodal embedder (a
    `vocab_size` x width hard-token table, two norms, a projection to the text width)."""
    arch = v.str("architecture") or "mobilenetv5_300m_enc"
    if arch not in MOBILENET_V5_PARAMS:
        raise v.error(f"vision architecture {arch!r}: only {', '.join(MOBILENET_V5_PARAMS)} "
                      "(Gemma 3n's released tower) has a known size")
    h = v.int("hidden_size", default=2048, hi=LIMITS["hidden"])
    vocab = v.int("vocab_size", default=128, lo=0, hi=LIMITS["vocab"])
    return MOBILENET_V5_PARAMS[arch] + vocab * h + 2 * h + h * text_h, h


def _dims(v: Fields) -> tuple[int, int, int]:
    hit = v.first_int(("hidden_size", "embed_dim", "vt_hidden_size", "width"), hi=LIMITS["hidden"])
    h = hit[1] if hit else None
    if not h:
        raise v.error("vision_config without hidden_size")
    n = v.first_int(("depth", "num_hidden_layers", "num_layers", "vt_num_hidden_layers", "layers",
                     "conf_num_hidden_layers"), hi=LIMITS["layers"])
    if not n:
        raise v.error("vision_config without depth / num_hidden_layers")
    i_hit = v.first_int(("intermediate_size", "vt_intermediate_size", "mlp_dim"),
                        hi=LIMITS["intermediate"])
    i = i_hit[1] if i_hit else 4 * h
    return h, n[1], i


def _vision_params(top: Fields, v: Fields, text_h: int, notes: list[str]) -> tuple[int, int, int]:
    mt = (top.str("model_type") or "").lower()
    vt = (v.str("model_type") or "").lower()
    p = v.opt_int("patch_size", hi=4096) or v.opt_int("spatial_patch_size", hi=4096) or 14
    if mt in ("qwen2_vl",) and v.has("embed_dim"):
        e = v.int("embed_dim", hi=LIMITS["hidden"])
        n = v.int("depth", hi=LIMITS["layers"])
        i = int(e * (v.float("mlp_ratio", 4.0) or 4.0))
        out = v.int("hidden_size", default=text_h, hi=LIMITS["hidden"])
        m = e * 4
        total = 3 * 2 * p * p * e + n * _vit_block(e, i) + 2 * e + m * m + m + m * out + out
        return total, e, n
    h, n, i = _dims(v)
    if mt in ("qwen2_5_vl",) or v.has("fullatt_block_indexes"):
        out = v.int("out_hidden_size", default=text_h, hi=LIMITS["hidden"])
        t = v.int("temporal_patch_size", default=2, hi=64)
        m = h * v.int("spatial_merge_size", default=2, hi=64) ** 2
        block = 2 * h + 4 * h * h + 4 * h + 3 * h * i + 2 * i + h
        return 3 * t * p * p * h + n * block + h + m * m + m + m * out + out, h, n
    if v.has("num_position_embeddings") or mt.startswith(("qwen3_vl", "qwen3_5", "qwen3_omni")):
        out = v.int("out_hidden_size", default=text_h, hi=LIMITS["hidden"])
        t = v.int("temporal_patch_size", default=2, hi=64)
        m = h * v.int("spatial_merge_size", default=2, hi=64) ** 2
        pos = v.int("num_position_embeddings", default=2304, hi=LIMITS["positions"])
        merger = m * m + m + m * out + out
        deep = len(v.list("deepstack_visual_indexes") or [])
        total = (3 * t * p * p * h + h + pos * h + n * _vit_block(h, i) + 2 * h + merger
                 + deep * (2 * m + merger))
        return total, h, n
    if vt.startswith("siglip") or mt in ("gemma3", "paligemma"):
        img = v.int("image_size", default=224, hi=LIMITS["positions"])
        total = 3 * p * p * h + h + (img // p) ** 2 * h + n * _vit_block(h, i) + 2 * h
        return total + h * text_h + h, h, n                      # Gemma 3 projector + norm
    if vt == "pixtral" or mt == "mistral3":
        merge = top.opt_int("spatial_merge_size", hi=64) or 2
        total = 3 * p * p * h + h + n * _vit_block(h, i, gated=True, bias=False, ln=False)
        return total + h + h * merge * merge * h + h * text_h + text_h * text_h, h, n
    if vt == "moonvit" or mt.startswith("kimi"):
        total = 3 * p * p * h + h + 64 * 64 * h + n * _vit_block(h, i) + 2 * h
        m = 4 * h
        return total + 2 * h + m * m + m + m * text_h + text_h, h, n
    if vt.startswith("llama4") or mt == "llama4":
        img = v.int("image_size", default=336, hi=LIMITS["positions"])
        pin = v.int("projector_input_dim", default=4096, hi=LIMITS["hidden"])
        pout = v.int("projector_output_dim", default=4096, hi=LIMITS["hidden"])
        vout = v.int("vision_output_dim", default=pout, hi=LIMITS["hidden"])
        ratio = v.float("pixel_shuffle_ratio", 0.5) or 0.5
        shuffled = int(h / (ratio * ratio))
        total = (3 * p * p * h + h + ((img // p) ** 2 + 1) * h + 4 * h + n * _vit_block(h, i)
                 + shuffled * pin + pin * pout)
        return total + vout * text_h, h, n
    if vt.startswith("gemma4") or vt.startswith("gemma3n"):
        # NOTE: Gemma 4 vision (transformers Gemma4Vision*): linear patch projection, a 2 x N
        # position table, q/k/v/o without bias + q/k norms, gated MLP, four RMS norms.
        heads = v.int("num_attention_heads", default=max(1, h // 64), hi=LIMITS["heads"])
        hd = v.int("head_dim", default=h // heads, hi=LIMITS["hidden"])
        pos = v.int("position_embedding_size", default=10240, hi=LIMITS["positions"])
        block = 4 * h * heads * hd + 3 * h * i + 4 * h + 2 * hd
        return 3 * p * p * h + 2 * pos * h + n * block + h * text_h + h, h, n
    if mt.startswith("internvl") or vt.startswith("intern_vit"):
        img = v.int("image_size", default=448, hi=LIMITS["positions"])
        qk_norm = v.bool("qk_normalization", default=h >= 3200)
        block = _vit_block(h, i, bias=v.bool("qkv_bias", default=h < 3200), ln=False)
        block += 2 * h + (2 * h if qk_norm else 0) + 2 * h      # 2 norms, q/k norms, layer scales
        ratio = top.float("downsample_ratio", 0.5) or 0.5
        m = int(h / (ratio * ratio))
        total = 3 * p * p * h + h + h + ((img // p) ** 2 + 1) * h + n * block
        return total + 2 * m + m * text_h + text_h + text_h * text_h + text_h, h, n
    notes.append(f"vision tower ({vt or 'unknown'}) estimated as a plain ViT (+/- 5%)")
    return 3 * p * p * h + h + n * _vit_block(h, i) + 2 * h + h * text_h, h, n


def _audio_tower(a: Fields, text_h: int) -> int:
    h, n, i = _dims(a)
    if "gemma" in (a.str("model_type") or "") or a.has("conv_kernel_size"):
        # NOTE: conformer blocks: two macaron FFNs (2 x 8h^2), attention + relative keys
        # (5h^2), light conv (3h^2): about 24h^2 per block.
        return n * 24 * h * h + h * text_h
    return n * _vit_block(h, i) + 2 * h + h * text_h
