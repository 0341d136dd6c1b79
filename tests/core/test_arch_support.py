"""What a release supports (the tables generated from vLLM's sources): which releases
implement an architecture, vLLM's refusal before its Transformers fallback (0.7.2) and the
plan's note from 0.7.2 on; the minimum compute capability of a quantization method."""

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from core_specs import dense
from vramguard.core import arch_registry
from vramguard.core.arch_support import (encoder_tp_data, first_release_for, native_releases,
                                         not_native, quant_method_last_release,
                                         quant_method_refusal, quant_min_capability,
                                         rocm_refuses)
from vramguard.core.model import QuantSpec
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


@pytest.mark.parametrize("arch, version, expect", [
    ("Llama4ForConditionalGeneration", "0.9.0", False),
    ("Llama4ForConditionalGeneration", "0.9.1", True),      # read the switch
    ("Qwen2_5_VLForConditionalGeneration", "0.10.1", False),
    ("Qwen2_5_VLForConditionalGeneration", "0.10.2", True),  # supports_encoder_tp_data
    ("Qwen3_5ForConditionalGeneration", "0.17.0", True),     # inherited from Qwen3-VL
    ("HunYuanVLForConditionalGeneration", "0.28.0", True),
    ("HunYuanVLForConditionalGeneration", "0.29.0", False),
    ("Qwen2_5_VLForConditionalGeneration", "0.40.0", True),  # newer: judged by the newest
    ("Gemma3ForConditionalGeneration", "0.33.0", False),
    (None, "0.33.0", False),
])
def test_encoder_tp_data(arch, version, expect):
    assert encoder_tp_data(arch, version) is expect


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


_QUANT_INIT = '''
from .fp8 import Fp8Config
QUANTIZATION_METHODS = {"fp8": Fp8Config, "fp8_alias": Fp8Config, "odd": OddConfig}
'''
_QUANT_FP8 = '''
class Base:
    @classmethod
    def get_min_capability(cls) -> int:
        return %d

class Fp8Config(Base):
    @classmethod
    def get_name(cls):
        return "fp8"

class OddConfig:
    def get_name(self):
        return "odd"
    def get_min_capability(self):
        return current_platform.thing()
'''
_QUANT_INIT_LITERAL = '''
from typing import Literal
from .fp8 import Fp8Config
QuantizationMethods = Literal["fp8", "odd", "newer"]
DEPRECATED_QUANTIZATION_METHODS = ["odd"]
method_to_config = {"fp8": Fp8Config, "odd": OddConfig}
'''
_QUANT_OVERRIDE = '''
class Claimer:
    @classmethod
    def override_quantization_method(cls, hf_quant_cfg, user_quant):
        return "fp8" if hf_quant_cfg.get("quant_method") == "fp8_alias" else None
'''
_REG = '''
_TEXT_GENERATION_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM"), %s}
_ROCM_UNSUPPORTED_MODELS = {"RocmOnlyForCausalLM": ("x", "y")}
_PREVIOUSLY_SUPPORTED_MODELS = {"OldForCausalLM": "0.1.0"}
_VLLM_MODELS = {**_TEXT_GENERATION_MODELS}
'''


def test_the_generator_reads_registry_and_quantization_tables(tmp_path):
    gen = _generator()
    for name, extra, cap in (("0.5.0", "", 89), ("0.6.0", '"NewForCausalLM": ("new", "New")', 80),
                             ("0.6.0.post1", '"PostForCausalLM": ("p", "P")', 0),
                             ("0.7.0", "", 80)):
        vllm = tmp_path / "rel" / name / f"vllm-{name}" / "vllm" / "model_executor"
        (vllm / "models").mkdir(parents=True)
        (vllm / "models" / "registry.py").write_text(_REG % extra)
        if name == "0.6.0":     # a model class that inherits supports_encoder_tp_data
            (vllm / "models" / "new.py").write_text(
                "class Base:\n    supports_encoder_tp_data = True\n\n\n"
                "class New(Base):\n    pass\n\n\nclass P:\n    pass\n")
        if cap:
            (vllm / "layers" / "quantization").mkdir(parents=True)
            (vllm / "layers" / "quantization" / "__init__.py").write_text(
                _QUANT_INIT_LITERAL if name == "0.7.0" else _QUANT_INIT)
            (vllm / "layers" / "quantization" / "fp8.py").write_text(_QUANT_FP8 % cap)
            if name == "0.7.0":
                (vllm / "layers" / "quantization" / "claim.py").write_text(_QUANT_OVERRIDE)
    out = tmp_path / "core"
    out.mkdir()
    assert gen.main([str(tmp_path / "rel"), "--write-dir", str(out)]) == 0
    ns: dict = {}
    exec((out / "arch_registry.py").read_text(), ns)
    assert ns["EXAMINED"] == ("0.5.0", "0.6.0", "0.7.0")
    assert ns["NATIVE"] == {"LlamaForCausalLM": "0.5.0-", "NewForCausalLM": "0.6.0-0.6.0",
                            "PostForCausalLM": "0.6.0-0.6.0"}
    # encoder TP data: only the releases with model files are examined for it
    assert ns["ENCODER_EXAMINED"] == ("0.6.0",)
    assert ns["ENCODER_TP_DATA"] == {"NewForCausalLM": "0.6.0-"}
    exec((out / "quant_registry.py").read_text(), ns)
    assert ns["QUANT_EXAMINED"] == ("0.5.0", "0.6.0", "0.7.0")
    # inherited minimum; the name from get_name(); a computed minimum is not kept
    assert ns["MIN_CAPABILITY"] == {"fp8": "0.5.0:89:fp8,0.6.0:80:fp8",
                                    "fp8_alias": "0.5.0:89:fp8,0.6.0:80:fp8,0.7.0:-"}
    # accepted names: the table's keys, then the Literal (in order: "newer" has no class);
    # deprecated; the names an override compares a checkpoint's method with
    assert ns["METHODS"] == {"fp8": "0.5.0-", "fp8_alias": "0.5.0-0.6.0", "newer": "0.7.0-",
                             "odd": "0.5.0-"}
    assert ns["DEPRECATED"] == {"odd": "0.7.0-"}
    assert ns["CLAIMED"] == {"fp8": "0.7.0-", "fp8_alias": "0.7.0-"}


@pytest.mark.parametrize("method, version, expect", [
    ("fp8", "0.4.1", (90, "fp8")),
    ("fp8", "0.13.0", (80, "fp8")),
    ("fp8", "0.14.0", (75, "fp8")),          # Marlin on Turing
    ("fp8", "0.4.0", None),                  # older than the oldest examined
    ("awq", "0.23.0", (75, "awq")),
    ("awq", "0.24.0", (75, "auto_awq")),     # AutoAWQConfig reports its own name
    ("auto_round", "0.9.0", (60, "auto-round")),   # vLLM spells it with a dash
    ("gguf", "0.24.0", None),                # not in 0.24's method table
    ("no_such_method", "0.33.0", None),
    (None, "0.33.0", None),
])
def test_quant_min_capability(method, version, expect):
    assert quant_min_capability(method, version) == expect


@pytest.mark.parametrize("method, version, expect", [
    ("bitsandbytes", "0.27.1", None),
    ("bitsandbytes", "0.28.0", ("unknown", "bitsandbytes")),   # gone from the method list
    ("bitsandbytes", "0.33.0", ("unknown", "bitsandbytes")),
    ("bitsandbytes", "0.4.3", ("unknown", "bitsandbytes")),    # from 0.5.0
    ("auto_round", "0.13.0", None),
    ("auto_round", "0.14.0", ("deprecated", "auto-round")),    # vLLM's spelling
    ("auto_round", "0.16.0", None),                  # INC's override loads it from 0.16
    ("fbgemm_fp8", "0.13.0", None),
    ("fbgemm_fp8", "0.20.0", ("deprecated", "fbgemm_fp8")),
    ("experts_int8", "0.15.0", ("deprecated", "experts_int8")),   # judged by 0.14.1
    ("experts_int8", "0.20.0", None),
    ("aqlm", "0.11.0", ("unknown", "aqlm")),
    ("gptq", "0.40.0", None),                        # newer than examined: the newest
    ("fp8", "0.3.0", None),                          # older than the oldest examined
    ("my_plugin_method", "0.33.0", None),            # no release lists it: a plugin's
    (None, "0.33.0", None),
])
def test_quant_method_refusal(method, version, expect):
    assert quant_method_refusal(method, version) == expect


def _bnb(spec):
    """`spec` as a bitsandbytes 4-bit checkpoint."""
    return replace(spec, quant=QuantSpec(method="bitsandbytes", bits=4, group_size=64,
                                         linear_bytes_per_param=0.53))


def test_a_method_the_release_lacks_is_refused_in_vllms_words():
    spec, l4 = dense("Qwen/Qwen2.5-7B-Instruct"), lookup_gpu("L4")
    bnb = _bnb(spec)
    with pytest.raises(UsageError) as exc:
        plan(bnb, Settings(), l4, vllm_version="0.28.0")
    assert exc.value.what == "Unknown quantization method: bitsandbytes. Must be one of [...]."
    assert exc.value.where == "quantization_config"
    assert "0.5.0-0.27.1" in exc.value.fix
    assert plan(bnb, Settings(max_model_len=4096), l4, vllm_version="0.27.1").outcome.ok
    # the flag: argparse's choices before 0.17, ModelConfig's check from 0.17
    with pytest.raises(UsageError) as exc:
        plan(spec, Settings(quantization="aqlm"), l4, vllm_version="0.12.0")
    assert exc.value.what == ("argument --quantization/-q: invalid choice: 'aqlm' "
                              "(choose from ...)")
    assert exc.value.where == "--quantization"
    with pytest.raises(UsageError) as exc:
        plan(spec, Settings(quantization="bitsandbytes"), l4, vllm_version="0.33.0")
    assert exc.value.what.startswith("Unknown quantization method: bitsandbytes.")
    # a method vramguard names from a checkpoint's config is left to the loaders' checks
    fp4 = replace(spec, quant=QuantSpec(method="modelopt_fp4", bits=4.5, group_size=16,
                                        linear_bytes_per_param=0.5625))
    plan(fp4, Settings(max_model_len=4096), lookup_gpu("B200"), vllm_version="0.8.5")


def test_a_deprecated_method_needs_the_flag():
    spec, h100 = dense("Qwen/Qwen2.5-7B-Instruct"), lookup_gpu("H100-80GB")
    with pytest.raises(UsageError) as exc:
        plan(spec, Settings(quantization="fbgemm_fp8"), h100, vllm_version="0.20.0")
    # NOTE: vLLM passes the name as a second ValueError argument: it prints the tuple
    assert exc.value.what == (
        "('The quantization method %s is deprecated and will be removed in future versions "
        "of vLLM. To bypass, set `--allow-deprecated-quantization`.', 'fbgemm_fp8')")
    allowed = Settings(quantization="fbgemm_fp8", allow_deprecated_quantization=True)
    assert plan(spec, allowed, h100, vllm_version="0.20.0").outcome.ok
    assert plan(spec, Settings(quantization="fbgemm_fp8"), h100,
                vllm_version="0.13.0").outcome.ok
    with pytest.raises(UsageError) as exc:        # the flag itself is 0.14+
        plan(spec, Settings(allow_deprecated_quantization=True), h100, vllm_version="0.13.0")
    assert "unrecognized arguments: --allow-deprecated-quantization" in exc.value.what


def test_first_release_for_a_capability():
    assert first_release_for("fp8", 75) == "0.14.0"
    assert first_release_for("fp8", 70) is None
    assert first_release_for("fp8", 89) == "0.4.2"
    assert first_release_for("gguf", 80) is None       # gone from 0.24


def test_a_gpu_below_the_methods_minimum_is_refused_in_vllms_words():
    spec, v100 = dense("Qwen/Qwen2.5-7B-Instruct"), lookup_gpu("V100-16GB")
    with pytest.raises(UsageError) as exc:
        plan(spec, Settings(quantization="fp8"), v100, vllm_version="0.13.0")
    assert exc.value.what == ("The quantization method fp8 is not supported for the current "
                              "GPU. Minimum capability: 80. Current capability: 70.")
    assert exc.value.where == "--quantization"
    t4 = lookup_gpu("T4")
    with pytest.raises(UsageError) as exc:
        plan(spec, Settings(quantization="fp8"), t4, vllm_version="0.13.0")
    assert "vLLM 0.14.0 and newer run it on this GPU" in exc.value.fix
    short = Settings(quantization="fp8", max_model_len=4096)
    assert plan(spec, short, t4, vllm_version="0.16.0").outcome.ok
    # NOTE: up to 0.15 online FP8 allocates every layer in 16-bit at init (quantization/fp8.py):
    # the 8B model's 15 GiB of bf16 weights do not fit on the T4 then
    assert plan(spec, short, t4, vllm_version="0.14.0").outcome.failure == "weights_oom"


def test_a_checkpoints_method_is_checked_too():
    awq = replace(dense("Qwen/Qwen2.5-7B-Instruct-AWQ"),
                  quant=QuantSpec(method="awq", bits=4, group_size=128,
                                  linear_bytes_per_param=0.53))
    with pytest.raises(UsageError) as exc:
        plan(awq, Settings(), lookup_gpu("V100-32GB"), vllm_version="0.24.0")
    assert exc.value.where == "quantization_config"
    assert exc.value.what.startswith("The quantization method auto_awq is not supported")
    short = Settings(max_model_len=4096)
    assert plan(awq, short, lookup_gpu("T4"), vllm_version="0.24.0").outcome.ok
    # AMD reports its own capabilities; vLLM's check is not modelled there
    assert plan(awq, short, lookup_gpu("MI300X"), vllm_version="0.24.0").outcome.ok


def test_bf16_below_compute_capability_8_is_refused_in_vllms_words():
    t4, a100 = lookup_gpu("T4"), lookup_gpu("A100-80GB")
    bf16 = replace(dense("Qwen/Qwen2.5-3B-Instruct", layers=24, hidden=2048, heads=16),
                   torch_dtype="bfloat16")
    short = Settings(max_model_len=4096)
    with pytest.raises(UsageError) as exc:
        plan(bf16, Settings(dtype="bfloat16", max_model_len=4096), t4, vllm_version="0.33.0")
    assert exc.value.what == (
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
        "Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly "
        "setting the `dtype` flag in CLI, for example: --dtype=half.")
    assert exc.value.where == "--dtype"
    # --dtype auto with a bfloat16 config: refused up to 0.9.0 (no space before `dtype` up
    # to 0.7.3), float16 from 0.9.1
    with pytest.raises(UsageError) as exc:
        plan(bf16, short, t4, vllm_version="0.7.3")
    assert "explicitly setting the`dtype` flag" in exc.value.what
    assert exc.value.where == "config.json torch_dtype"
    with pytest.raises(UsageError):
        plan(bf16, short, t4, vllm_version="0.9.0")
    assert plan(bf16, short, t4, vllm_version="0.9.1").outcome.ok
    assert plan(bf16, Settings(dtype="half", max_model_len=4096), t4,
                vllm_version="0.7.3").outcome.ok
    assert plan(replace(bf16, torch_dtype="float16"), short, t4,
                vllm_version="0.7.3").outcome.ok
    assert plan(bf16, Settings(dtype="bfloat16", max_model_len=4096), a100).outcome.ok


def test_the_gguf_rows_follow_the_method_table():
    """`rules.gguf_loader` and the releases whose method list has `gguf` agree."""
    from vramguard.core.quant_registry import QUANT_EXAMINED
    from vramguard.core.rules import resolve_rules
    for version in QUANT_EXAMINED:
        assert resolve_rules(version).gguf_loader == (
            quant_method_refusal("gguf", version) is None), version


def test_the_last_release_of_a_method():
    assert quant_method_last_release("gguf") == "0.23"             # 0.5.5-0.23.0
    assert quant_method_last_release("bitsandbytes") == "0.27.1"   # 0.5.0-0.27.1
    assert quant_method_last_release("fp8") is None                # still accepted
    assert quant_method_last_release("my_plugin_method") is None   # no release lists it


@pytest.mark.parametrize("method, version, expect", [
    ("bitsandbytes", "0.16.0", "bitsandbytes"),      # ROCm lists it 0.17-0.27 only
    ("bitsandbytes", "0.17.0", None),
    ("bitsandbytes", "0.28.0", None),                # gone everywhere: quant_method_refusal's
    ("experts_int8", "0.20.0", "experts_int8"),
    ("fp8", "0.5.4", "fp8"),                         # from 0.5.5 on ROCm
    ("fp8", "0.5.5", None),
    ("awq", "0.5.4", None),                          # an override may load it as another
    ("my_plugin_method", "0.20.0", None),
])
def test_rocm_refuses(method, version, expect):
    assert rocm_refuses(method, version) == expect


def test_rocm_refuses_a_method_its_platform_does_not_list_in_vllms_words():
    spec, mi300 = dense("Qwen/Qwen2.5-7B-Instruct"), lookup_gpu("MI300X")
    bnb = _bnb(spec)
    with pytest.raises(UsageError) as exc:
        plan(bnb, Settings(), mi300, vllm_version="0.16.0")
    assert exc.value.what == "bitsandbytes quantization is currently not supported in rocm."
    assert exc.value.where == "quantization_config"
    assert "0.17.0-0.27.1" in exc.value.fix
    assert plan(bnb, Settings(), mi300, vllm_version="0.17.0").outcome.ok
    assert plan(bnb, Settings(), lookup_gpu("H100-80GB"), vllm_version="0.16.0").outcome.ok
    with pytest.raises(UsageError) as exc:      # config.py's check before 0.6.5: "ROCm"
        plan(spec, Settings(quantization="fp8"), mi300, vllm_version="0.5.4")
    assert exc.value.what == "fp8 quantization is currently not supported in ROCm."


def test_tensor_parallel_splits_a_quantized_layout_cannot_take():
    """awq.py / gptq.py: a row-parallel input that is not whole groups; quantization/fp8.py
    (0.6.6-0.28): block-FP8 MoE experts whose per-rank size is not whole blocks."""
    awq = replace(dense("Qwen/Qwen2.5-14B-Instruct-AWQ", inter=13824, layers=4),
                  quant=QuantSpec(method="awq", bits=4, group_size=128,
                                  linear_bytes_per_param=0.53))
    h100 = lookup_gpu("H100")
    tp8 = Settings(tensor_parallel_size=8, user_set=frozenset({"tensor_parallel_size"}))
    with pytest.raises(UsageError, match="The input size is not aligned with the quantized "
                                         "weight shape"):
        plan(awq, tp8, h100, vllm_version="0.11.0")
    assert plan(awq, replace(tp8, tensor_parallel_size=2), h100, vllm_version="0.11.0")
    from vramguard.sources.resolve import load_model_spec
    moe = load_model_spec("Qwen/Qwen3-30B-A3B-FP8", offline=True)
    assert moe.quant.block_shape == (128, 128)
    tp4 = Settings(tensor_parallel_size=4, user_set=frozenset({"tensor_parallel_size"}))
    with pytest.raises(UsageError, match=r"weight = 192 is not divisible by weight "
                                         r"quantization block_n = 128\."):
        plan(moe, tp4, h100, vllm_version="0.11.0")
    assert plan(moe, tp4, h100, vllm_version="0.29.0")
    ep = tp4.with_(enable_expert_parallel=True)
    assert plan(moe, ep, h100, vllm_version="0.11.0")
