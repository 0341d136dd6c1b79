"""The dtypes of the Mamba / linear-attention states vLLM V1 keeps in its KV pages, by release.

Facts read in vLLM's model_executor/layers/mamba/mamba_utils.py (`MambaStateDtypeCalculator`),
config/cache.py (`MambaDType`) and models/config.py (the NemotronH and Qwen3.5 hooks), 0.10.1
- 0.33: the conv state follows --mamba-cache-dtype (auto: the model dtype); the SSM state
--mamba-ssm-cache-dtype, else the model's hook (NemotronH 0.13+: its config's
`mamba_ssm_cache_dtype`, else float16 up to 0.19 and float32 from 0.20; Qwen3.5 0.17+: its
config's `mamba_ssm_dtype`), else the conv dtype. Gated DeltaNet reads the SSM flag from 0.17;
linear attention (MiniMax-Text-01) has one state in the conv dtype.
"""

import pytest

from core_specs import qwen3_next_kv_only
from vramguard.core import kv
from vramguard.core.model import MambaState
from vramguard.core.rules import resolve_rules
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

NEMO = MambaState(kind="mamba2", conv_shape=(8, 3), ssm_shape=(4, 2, 2), ssm_hook="nemotron_h")
NEMO_CFG = MambaState(kind="mamba2", conv_shape=(8, 3), ssm_shape=(4, 2, 2),
                      ssm_dtype="float32", ssm_hook="nemotron_h")
QWEN35 = MambaState(kind="gdn", conv_shape=(8, 3), ssm_shape=(4, 2, 2), ssm_dtype="float32",
                    ssm_hook="qwen3_5")
NEXT = MambaState(kind="gdn", conv_shape=(8, 3), ssm_shape=(4, 2, 2))
LINEAR = MambaState(kind="linear_attention", conv_shape=(), ssm_shape=(4, 2, 2))
S = Settings


@pytest.mark.parametrize("state, settings, version, want", [
    (NEMO, S(), "0.12.0", (2, 2)),                     # no hook yet: the conv dtype
    (NEMO, S(), "0.13.0", (2, 2)),                     # hook default float16
    (NEMO, S(), "0.20.0", (2, 4)),                     # hook default float32
    (NEMO_CFG, S(), "0.13.0", (2, 4)),                 # the config's dtype wins over it
    (NEMO_CFG, S(mamba_ssm_cache_dtype="float16"), "0.20.0", (2, 2)),   # the flag wins
    (NEMO, S(mamba_cache_dtype="float32"), "0.12.0", (4, 4)),  # SSM auto follows conv
    (NEMO, S(mamba_cache_dtype="float32"), "0.13.0", (4, 2)),  # ... unless the hook sets it
    (QWEN35, S(), "0.17.0", (2, 4)),
    (QWEN35, S(mamba_ssm_cache_dtype="bfloat16"), "0.22.0", (2, 2)),
    (NEXT, S(), "0.33.0", (2, 2)),                     # Qwen3-Next: no hook
    (NEXT, S(mamba_ssm_cache_dtype="float32"), "0.16.0", (2, 2)),   # GDN ignores it < 0.17
    (NEXT, S(mamba_ssm_cache_dtype="float32"), "0.17.0", (2, 4)),
    (LINEAR, S(), "0.20.0", (2, 2)),                   # one state, the model dtype
    (LINEAR, S(mamba_ssm_cache_dtype="float32"), "0.22.0", (2, 2)),
    (LINEAR, S(mamba_cache_dtype="float32"), "0.22.0", (4, 4)),
])
def test_state_dtypes_by_release(state, settings, version, want):
    assert kv.mamba_state_dtype_bytes(state, settings, resolve_rules(version), 2) == want


def test_the_ssm_dtype_changes_the_page_and_so_the_block_size():
    """Qwen3-Next (GDN: conv (8192, 3), ssm (32, 128, 128)) on 0.17: an fp32 SSM state
    doubles the SSM bytes, so the attention block that must hold one Mamba page grows."""
    from vramguard.core.planner import plan
    from vramguard.core.gpu_catalog import lookup_gpu

    def block(**kw):
        return plan(qwen3_next_kv_only(), Settings(max_model_len=4096, **kw),
                    lookup_gpu("H200"), vllm_version="0.17.0").kv.block_size
    base, fp32 = block(), block(mamba_ssm_cache_dtype="float32")
    assert (base, fp32) == (544, 1056)     # 16 x cdiv(8192*3*2 + 524288*{2,4}, 16 x 2048)


@pytest.mark.parametrize("version, settings, match", [
    ("0.10.0", S(mamba_cache_dtype="float32"), "unrecognized arguments: --mamba-cache-dtype"),
    ("0.12.0", S(mamba_ssm_cache_dtype="float16"), "invalid choice: 'float16'"),
    ("0.21.0", S(mamba_cache_dtype="bfloat16"), "invalid choice: 'bfloat16'"),
])
def test_flags_checked_as_the_release_does(version, settings, match):
    from vramguard.core.planner import plan
    from vramguard.core.gpu_catalog import lookup_gpu
    with pytest.raises(UsageError, match=match):
        plan(qwen3_next_kv_only(), settings, lookup_gpu("H200"), vllm_version=version)
    ok = Settings(mamba_ssm_cache_dtype="bfloat16")
    assert plan(qwen3_next_kv_only(), ok, lookup_gpu("H200"), vllm_version="0.22.0")
