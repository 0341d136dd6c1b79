"""DeepSeek-V4's KV cache (compressed sparse attention, CSA) as vLLM 0.26-0.33 lays it out.

Every CSA layer keeps a sliding-window cache (block 64). With a compress ratio r > 1 it also
keeps the compressed latent (one entry per r tokens, in blocks of 256 tokens) and a
compressor state (fp32; block 4 with a window of 8 for r = 4, block 8 with a window of 128
for r = 128); ratio-4 layers add the indexer's keys (block 256) and its compressor state
(block 4, window 8). The MTP layer is a sliding-window-only layer. Pages are rounded up to
576 bytes (fp8_ds_mla: 584 bytes per entry) or 512 (plain rows).

vLLM then puts all full caches in one group and splits each (block, window) bucket of
sliding caches into groups of about `t` layers (`_approximate_gcd`), the version deciding
the details (`VllmRules.csa_grouping`, read in the released wheels: 0.26
`kv_cache_utils.py` ~1284-1892, 0.27-0.28 the same without padding, 0.29+
`_get_packed_kv_cache_groups` / `kv_cache_planning.py`; see docs/accuracy.md):

* "padded" (0.26): sliding pages padded up to the smallest full-group page at least as
  large; a block of the pool holds, per page size, as many pages as the largest count of it
  in one group; concurrency weighs each group's blocks by its page;
* "packed" (0.27-0.28): no padding; a block of the pool is the widest group's pages;
* "balanced" (0.29+): like "packed", with `t` taken over the buckets whose page sizes come
  in equal numbers; the one-request check counts the pool's block (and the null block).
"""

from __future__ import annotations

from collections import Counter

from .kv import KvGroup, KvLayout, cdiv
from .model import CSA, FULL, SLIDING, AttentionSpec
from .rules import VllmRules
from .settings import Settings

CSA_BLOCK_TOKENS = 256          # the full caches' block (the FlashMLA sparse kernel's size)
SWA_BLOCK_TOKENS = 64
DS_MLA_ENTRY_BYTES = 584        # fp8_ds_mla: 448 NoPE fp8 + 64 RoPE bf16 + 8 scale bytes
DS_MLA_ALIGN_BYTES = 576
PLAIN_ALIGN_BYTES = 512
STATE_BYTES = 4                 # compressor states are fp32


def _round_up(n: int, align: int) -> int:
    return cdiv(n, align) * align


def uses_ds_mla(kv_dtype_name: str) -> bool:
    """`auto` and fp8 map to the fp8_ds_mla layout (the default FlashMLA / SM120 path)."""
    return kv_dtype_name == "auto" or kv_dtype_name.startswith("fp8")


def layer_caches(a: AttentionSpec, *, block: int, kv_dtype_name: str,
                 kv_bytes: int) -> list[tuple[tuple[int, int] | None, int]]:
    """One CSA layer's caches as (bucket, page bytes); bucket None is the full group, else
    the sliding bucket's (block, window)."""
    d = a.head_dim or 0
    entry, align = ((DS_MLA_ENTRY_BYTES, DS_MLA_ALIGN_BYTES) if uses_ds_mla(kv_dtype_name)
                    else (d * kv_bytes, PLAIN_ALIGN_BYTES))
    window = a.sliding_window_tokens or 0
    out = [((SWA_BLOCK_TOKENS, window), _round_up(SWA_BLOCK_TOKENS * entry, align))]
    r = max(1, a.compress_ratio)
    if r > 1:
        coff, state_block = (2, 4) if r == 4 else (1, 8)
        out.append((None, _round_up(block // r * entry, align)))
        out.append(((state_block, coff * r),
                    _round_up(state_block * 2 * coff * d * STATE_BYTES, align)))
    if r == 4 and a.indexer_head_dim:
        idx = a.indexer_head_dim
        out.append((None, _round_up(block // 4 * (idx + idx // 128 * 4), align)))
        out.append(((4, 8), _round_up(4 * 2 * 2 * idx * STATE_BYTES, align)))
    return out


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """vLLM's `_approximate_gcd`: the group size in [lower_bound, max(values)] that pads the
    counts least (the larger one on a tie)."""
    lb = max(1, lower_bound)
    if lb > max(values):
        return lb
    best_d, best = lb, None
    for d in range(lb, max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best is None or pad < best or (pad == best and d > best_d):
            best, best_d = pad, d
    return best_d


def _split(pages: Counter, n: int) -> list[Counter]:
    """A bucket's page counts split into n groups, repeat by repeat (every n-th repeat)."""
    return [Counter({ps: cdiv(m - i, n) for ps, m in pages.items() if m > i}) for i in range(n)]


def group(buckets: dict, grouping: str) -> list[tuple[tuple[int, int] | None, Counter]]:
    """The KV-cache groups (bucket, page counts), the full group first."""
    full = buckets.get(None, Counter())
    sliding = [(k, c) for k, c in buckets.items() if k is not None]
    most = lambda c: max(c.values()) if c else 0   # noqa: E731
    balanced = lambda c: len(set(c.values())) == 1  # noqa: E731
    out = [(None, full)] if full else []
    if grouping in ("padded", "packed"):
        t = approximate_gcd([most(full)] + [most(c) for _, c in sliding], most(full))
        full_pages = sorted(full)
        for key, c in sliding:
            if grouping == "padded" and full_pages:
                padded = Counter()
                for ps, m in c.items():
                    padded[min((p for p in full_pages if p >= ps), default=ps)] += m
                c = padded
            n = cdiv(most(c), t) if balanced(c) else 1
            out += [(key, g) for g in _split(c, n)]
        return out
    # NOTE: "balanced": every bucket, the full one included, is split when its page sizes
    # come in equal numbers; `t` is taken over those buckets.
    every = out + sliding
    lb = max((most(c) for _, c in every if balanced(c) and len(c) > 1), default=0)
    t = approximate_gcd([most(c) for _, c in every if balanced(c)], lb) if lb else None
    out = []
    for key, c in every:
        n = cdiv(most(c), t) if (t and balanced(c)) else 1
        out += [(key, g) for g in _split(c, n)]
    return out


def csa_layout(runs, settings: Settings, rules: VllmRules, kv_dtype_name: str,
               kv_bytes: int) -> KvLayout:
    """The KV layout of the CSA layers in `runs` ((AttentionSpec, count) pairs) for this
    version's grouping (`rules.csa_grouping`)."""
    grouping = rules.csa_grouping
    block = int(settings.block_size or CSA_BLOCK_TOKENS)
    buckets: dict = {}
    for a, n in runs:
        if a.kind != CSA:
            continue
        for key, page in layer_caches(a, block=block, kv_dtype_name=kv_dtype_name,
                                      kv_bytes=kv_bytes):
            buckets.setdefault(key, Counter())[page] += n
    groups = group(buckets, grouping)
    group_pages = tuple(sum(ps * m for ps, m in c.items()) for _, c in groups)
    if grouping == "padded":
        slots: Counter = Counter()
        for _, c in groups:
            for ps, m in c.items():
                slots[ps] = max(slots[ps], m)
        per_block = sum(ps * m for ps, m in slots.items())
    else:
        per_block = max(group_pages)
    check = per_block
    if grouping != "balanced":
        # NOTE: 0.26-0.28's one-request check: the largest layer count of a group times the
        # full group's distinct pages, per block of every group.
        widest = max(max(c.values()) for _, c in groups)
        check = widest * sum(set(buckets.get(None, Counter())))
    kv_groups = tuple(
        KvGroup(FULL, sum(c.values()), sum(c.values()), None, None, block) if key is None
        else KvGroup(SLIDING, sum(c.values()), sum(c.values()), key[1], None, key[0])
        for key, c in groups)
    return KvLayout(block_size=block, page_size_bytes=per_block,
                    bytes_per_token=per_block // block, groups=kv_groups,
                    attn_page_per_token_layer=0,
                    group_page_bytes=group_pages if grouping == "padded" else (),
                    check_block_bytes=check if check != per_block else 0)
