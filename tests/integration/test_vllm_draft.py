"""A real vLLM 0.32 CPU server speculating with a draft LM (a copy of the tiny Llama): the
drafter's attention layers share the KV pool, which the plan of the same launch predicts."""

from __future__ import annotations

import json

import pytest

import vllm_server

pytestmark = pytest.mark.integration

# §13: 2 layers x 2 x 2 KV heads x 32 x 2 B = 512 B/token; the drafter's 2 layers as much
# again, so the 1 GiB pool holds half the tokens of the normal server (2,097,152).
TOKENS = 1_048_576


def test_the_drafter_halves_the_pool_as_planned(vllm_draft):
    from vramguard.core.gpu import GpuSpec
    from vramguard.core.planner import plan
    from vramguard.logs.parser import parse
    from vramguard.sources.draft import load_with_draft
    from vramguard.sources.vllm_args import parse_vllm_args

    text = vllm_draft.log_path.read_text(errors="replace")
    line = ("CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 256 tokens per "
            "request: 4096.00x")
    assert line in text
    assert "Draft model KV cache initialized for CPU backend" in text
    ex = parse(str(vllm_draft.log_path))
    assert ex.kv_cache_tokens == TOKENS

    # NOTE: the launch's own flags, as `vramguard plan -- ...` reads them
    flags = vllm_server.VARIANTS["draft"]
    cmd = parse_vllm_args([str(vllm_server.TINY_DIR), "--max-model-len", "256",
                           "--enforce-eager", *flags])
    assert json.loads(flags[1])["model"] == cmd.settings.speculative_model
    spec, notes = load_with_draft(cmd.model, cmd.settings, offline=True)
    assert spec.draft is not None and notes == []
    cpu = GpuSpec(name="cpu", total_bytes=64 << 30, vendor="cpu")
    p = plan(spec, cmd.settings.with_(kv_cache_memory_bytes=1 << 30), cpu,
             vllm_version="0.32.0")
    assert p.outcome.ok and p.kv.tokens == TOKENS
    assert line in p.log_lines
