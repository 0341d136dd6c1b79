"""Which releases implement an architecture (the generated registry table), vLLM's refusal
before its Transformers fallback (0.7.2), and the plan's note from 0.7.2 on."""

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from core_specs import dense
from vramguard.core import arch_registry
from vramguard.core.arch_support import native_releases, not_native
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import plan
from vramguard.core.rules import parse_version
from vramguard.core.settings import Settings
from vramguard.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def _qwen3():
    return replace(dense("Qwen/Qwen3-8B"), architecture="Qwen3ForCausalLM")


@pytest.mark.parametrize("arch, version, expect", [
    ("Qwen3ForCausalLM", "0.8.3", True),           # first in 0.8.4's registry
    ("Qwen3ForCausalLM", "0.8.4", False),
    ("Qwen3ForCausalLM", "0.40.0", False),          # newer than examined: the newest decides
    ("Qwen3ForCausalLM", "0.4.0", False),           # older than examined: nothing said
    ("MllamaForConditionalGeneration", "0.6.1", True),
    ("MllamaForConditionalGeneration", "0.10.2", False),
    ("MllamaForConditionalGeneration", "0.11.0", True),   # removed with the V0 engine
    ("ChatGLMForConditionalGeneration", "0.8.0", True),   # a gap: 0.8.0-0.8.3
    ("ChatGLMForConditionalGeneration", "0.8.4", False),
    ("NoSuchModelForCausalLM", "0.33.0", True),
    ("gguf:llama", "0.6.3", False),                 # vLLM maps GGUF names itself
    (None, "0.6.3", False),
])
def test_not_native(arch, version, expect):
    assert not_native(arch, version) is expect


def test_native_releases_text():
    assert native_releases("Qwen3ForCausalLM") == "0.8.4 on"
    assert native_releases("MllamaForConditionalGeneration") == "0.6.2-0.10.2"
    assert native_releases("ChatGLMForConditionalGeneration") == "0.4.1-0.7.2, 0.8.4 on"
    assert native_releases("NoSuchModelForCausalLM") == "none of 0.4.1-0.33.0"


def test_generated_table_is_well_formed():
    examined = [parse_version(v) for v in arch_registry.EXAMINED]
    assert examined == sorted(set(examined))
    for arch, text in arch_registry.NATIVE.items():
        for span in text.split(","):
            first, _, last = span.partition("-")
            assert first in arch_registry.EXAMINED, arch
            assert not last or last in arch_registry.EXAMINED, arch


def test_before_the_fallback_vllm_refuses_in_its_words():
    spec, gpu = _qwen3(), lookup_gpu("H100-80GB")
    with pytest.raises(UsageError) as exc:
        plan(spec, Settings(), gpu, vllm_version="0.6.3")
    assert exc.value.what == ("Model architectures ['Qwen3ForCausalLM'] are not supported "
                                 "for now. Supported architectures: [...]")
    assert "0.8.4 on" in exc.value.fix


def test_from_the_fallback_the_plan_says_so():
    spec, gpu = _qwen3(), lookup_gpu("H100-80GB")
    p = plan(spec, Settings(), gpu, vllm_version="0.8.3")
    assert p.outcome.ok
    notes = [a for a in p.assumptions if "model registry" in a]
    assert len(notes) == 1 and "Transformers backend" in notes[0] and "0.8.4 on" in notes[0]
    assert not [a for a in plan(spec, Settings(), gpu, vllm_version="0.8.4").assumptions
                if "model registry" in a]


def test_a_development_build_is_not_refused():
    p = plan(_qwen3(), Settings(), lookup_gpu("H100-80GB"), vllm_version="0.6.4.dev12")
    assert any("development build" in a for a in p.assumptions)


def _generator():
    path = ROOT / "scripts" / "vllm_registry.py"
    spec = importlib.util.spec_from_file_location("vllm_registry", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["vllm_registry"] = mod
    spec.loader.exec_module(mod)
    return mod


_REG = '''
_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM"), %s}
_ROCM_UNSUPPORTED_MODELS = {"RocmOnlyForCausalLM": ("x", "y")}
_PREVIOUSLY_SUPPORTED_MODELS = {"OldForCausalLM": "0.1.0"}
_VLLM_MODELS = {**_TEXT_GENERATION_MODELS}
'''


def test_the_generator_reads_registry_tables(tmp_path):
    gen = _generator()
    for name, extra in (("0.5.0", ""), ("0.6.0", '"NewForCausalLM": ("new", "New")'),
                        ("0.6.0.post1", '"PostForCausalLM": ("p", "P")'), ("0.7.0", "")):
        d = tmp_path / "rel" / name / f"vllm-{name}" / "vllm" / "model_executor" / "models"
        d.mkdir(parents=True)
        (d / "registry.py").write_text(_REG % extra)
    out = tmp_path / "arch_registry.py"
    assert gen.main([str(tmp_path / "rel"), "--write", str(out)]) == 0
    ns: dict = {}
    exec(out.read_text(), ns)
    assert ns["EXAMINED"] == ("0.5.0", "0.6.0", "0.7.0")
    assert ns["NATIVE"] == {"LlamaForCausalLM": "0.5.0-", "NewForCausalLM": "0.6.0-0.6.0",
                            "PostForCausalLM": "0.6.0-0.6.0"}
