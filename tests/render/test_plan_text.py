"""render/plan_text.py and render/json_out.py on hand-built Plans."""

import io
import json
from pathlib import Path

from plans import failing_plan, ok_plan   # tests/render/plans.py (pytest puts this dir on the path)

from vramguard.render.json_out import dumps, print_json
from vramguard.render.plan_text import render_plan, use_color


def test_ok_plan_ledger_and_capacity():
    text = render_plan(ok_plan(), unicode=True)
    assert "✓ starts" in text
    for label in ("total (CUDA)", "requested (0.9 x total)", "weights", "activation peak",
                  "non-torch", "CUDA graphs", "KV cache"):
        assert label in text
    assert "79.19" in text and "14.99" in text and "54.58" in text
    for tag in ("catalog", "checkpoint", "estimated", "vLLM default", "derived"):
        assert tag in text
    assert "0.90" in text and "1.50" in text          # activation band 1.2 +- 25%
    assert "131,072 bytes/token" in text and "block size 16" in text
    assert "27,945 blocks" in text and "447,120 tokens" in text
    assert "3.41x at max_model_len 131,072" in text
    assert "Available KV cache memory: 54.58 GiB" in text
    assert "activation and non-torch memory estimated" in text
    assert "risk: CUDA graphs" in text
    assert "\033[" not in text


def test_failing_plan_verdict_and_fix():
    cmd = "vllm serve m --gpu-memory-utilization 0.3 --max-model-len 53776"
    text = render_plan(failing_plan(), unicode=True, fix_command=cmd)
    assert "✗ fails: kv_below_max_model_len" in text
    assert "vLLM: To serve at least one request" in text
    assert "--max-model-len 53776" in text
    assert cmd in text
    assert "1 more in --json" in text
    assert "longest request that fits: 53,776 tokens" in text


def test_ascii_fallback_and_color():
    text = render_plan(failing_plan(), unicode=False)
    assert "FAIL fails" in text and "✗" not in text
    text.encode("ascii")
    colored = render_plan(ok_plan(), color=True, unicode=True)
    assert "\033[32m" in colored


def test_all_ranks_and_tightest():
    plan = ok_plan(ranks=4)
    one = render_plan(plan, unicode=True)
    assert "rank 3 (tp 3, pp 0, layers 0-31), the tightest of 4" in one
    every = render_plan(plan, all_ranks=True, unicode=True)
    assert "Memory per rank (4 ranks)" in every and "r0" in every and "r3" in every
    assert "tightest: rank 3" in every
    wide = render_plan(ok_plan(ranks=12), all_ranks=True, unicode=True)
    assert max(len(line) for line in wide.splitlines() if "KV cache" in line) < 110
    assert "r11" in wide


def test_extra_assumptions_first():
    text = render_plan(ok_plan(), extra_assumptions=("GPU not given: assumed H100-80GB",))
    a = text.index("GPU not given")
    b = text.index("activation and non-torch")
    assert a < b


def test_use_color_respects_no_color(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_color(Tty())
    assert not use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Tty())


def test_json_printer():
    buf = io.StringIO()
    print_json(failing_plan().to_dict(), stream=buf)
    data = json.loads(buf.getvalue())
    assert data["startup"]["failure"] == "kv_below_max_model_len"
    assert json.loads(dumps({"x": float("inf"), "y": [float("nan")], "z": frozenset({2, 1})})) \
        == {"x": None, "y": [None], "z": [1, 2]}
    assert "✓" in dumps({"a": "✓"})


def test_json_schema_doc_covers_every_key():
    """docs/json-schema.md documents every key Plan.to_dict() emits."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "json-schema.md").read_text()
    d = failing_plan().to_dict()
    keys = set(d) | set(d["startup"]) | set(d["kv_cache"]) | set(d["ranks"][0])
    keys |= set(d["fixes"][0]) | set(d["ranks"][0]["terms"]["total"])
    missing = sorted(k for k in keys if f"`{k}`" not in doc)
    assert not missing, f"undocumented keys: {missing}"
    assert f"`schema_version` | int | {d['schema_version']}" in doc


def test_modelled_flags_show_in_the_settings_line_only_when_set():
    from dataclasses import replace
    plan = ok_plan()
    shown = replace(plan, settings={**plan.settings, "max_cudagraph_capture_size": 64,
                                    "mamba_cache_mode": None},
                    settings_sources={**plan.settings_sources,
                                      "max_cudagraph_capture_size": "user"})
    text = render_plan(shown)
    assert "max_cudagraph_capture_size 64" in text and "mamba_cache_mode" not in text
    quiet = replace(plan, settings={**plan.settings, "num_speculative_tokens": 0})
    assert "num_speculative_tokens" not in render_plan(quiet)
    spec = replace(plan, settings={**plan.settings, "num_speculative_tokens": 3},
                   settings_sources={**plan.settings_sources, "num_speculative_tokens": "user"})
    assert "num_speculative_tokens 3" in render_plan(spec)
