"""vLLM flag parsing: every flag form, suffixes, YAML, pasted commands, errors."""

import dataclasses
import json

import pytest

from vramguard.core.settings import Settings
from vramguard.errors import UsageError
from vramguard.sources.vllm_args import (
    command_with, format_command, human_readable_int, parse_vllm_args, parse_vllm_command,
    settings_from_mapping, settings_to_args)


def s(*tokens):
    return parse_vllm_args(list(tokens)).settings


# ---- numbers and suffixes ---------------------------------------------------------------
@pytest.mark.parametrize("text,value", [
    ("8192", 8192), ("25.6k", 25600), ("32k", 32000), ("32K", 32768), ("1m", 1_000_000),
    ("1M", 1 << 20), ("2g", 2_000_000_000), ("2G", 2 << 30), ("1T", 1 << 40), (" 4k ", 4000),
])
def test_human_readable_int(text, value):
    assert human_readable_int(text) == value


@pytest.mark.parametrize("text", ["2.5K", "abc", "", "-5", "1.5", "3x", "k"])
def test_human_readable_int_rejects(text):
    assert human_readable_int(text) is None


def test_max_model_len_forms():
    assert s("--max-model-len", "25.6k").max_model_len == 25600
    assert s("--max-model-len=32K").max_model_len == 32768
    assert s("--max_model_len", "4096").max_model_len == 4096
    assert s("--max_model_len=4096").max_model_len == 4096
    for tokens in (["--max-model-len", "auto"], ["--max-model-len", "-1"],
                   ["--max-model-len=-1"], ["--max-model-len", "AUTO"]):
        st = s(*tokens)
        assert st.max_model_len is None and st.max_model_len_auto
        assert "max_model_len" in st.user_set


def test_every_memory_flag():
    st = s("-tp", "4", "-pp", "2", "-dp", "2", "--gpu-memory-utilization", "0.85",
           "--max-num-seqs", "128", "--max-num-batched-tokens", "16k", "--dtype", "half",
           "-q", "awq", "--kv-cache-dtype", "fp8", "--block-size", "32", "--enforce-eager",
           "--kv-cache-memory-bytes", "20G", "--num-gpu-blocks-override", "1000",
           "--cpu-offload-gb", "4", "--swap-space", "0", "--no-enable-chunked-prefill",
           "--enable-prefix-caching", "--enable-expert-parallel", "--enable-lora",
           "--max-loras", "4", "--max-lora-rank", "64", "--disable-sliding-window",
           "--disable-hybrid-kv-cache-manager", "--disable-custom-all-reduce",
           "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 5}',
           "--model", "m")
    assert (st.tensor_parallel_size, st.pipeline_parallel_size, st.data_parallel_size) == (4, 2, 2)
    assert st.gpu_memory_utilization == 0.85
    assert st.max_num_seqs == 128 and st.max_num_batched_tokens == 16000
    assert (st.dtype, st.quantization) == ("half", "awq")
    assert (st.kv_cache_dtype, st.block_size) == ("fp8", 32)
    assert st.enforce_eager and st.kv_cache_memory_bytes == 20 << 30
    assert st.num_gpu_blocks_override == 1000
    assert st.cpu_offload_gb == 4.0 and st.swap_space == 0.0
    assert st.enable_chunked_prefill is False and st.enable_prefix_caching is True
    assert st.enable_expert_parallel and st.enable_lora
    assert (st.max_loras, st.max_lora_rank) == (4, 64)
    assert st.disable_sliding_window and st.disable_hybrid_kv_cache_manager
    assert st.disable_custom_all_reduce
    assert st.num_speculative_tokens == 5 and st.model == "m"
    assert {"tensor_parallel_size", "kv_cache_memory_bytes", "enable_chunked_prefill",
            "num_speculative_tokens", "model"} <= st.user_set
    assert "max_model_len" not in st.user_set


def test_long_names_and_equals_forms():
    st = s("--tensor-parallel-size=2", "--pipeline_parallel_size", "3", "--quantization=gptq")
    assert (st.tensor_parallel_size, st.pipeline_parallel_size, st.quantization) == (2, 3, "gptq")
    assert s("-tp=8").tensor_parallel_size == 8


def test_kv_cache_memory_prefix_and_suffixes():
    # vLLM's own suggestion message prints `--kv-cache-memory=<bytes>` (argparse prefix)
    assert s("--kv-cache-memory=123456789").kv_cache_memory_bytes == 123456789
    assert s("--kv-cache-memory", "8G").kv_cache_memory_bytes == 8 << 30
    assert s("--kv-cache-memory-bytes", "1.5g").kv_cache_memory_bytes == 1_500_000_000


def test_tristate_and_old_boolean_forms():
    assert s().enable_prefix_caching is None
    assert s("--enable-prefix-caching").enable_prefix_caching is True
    assert s("--no-enable-prefix-caching").enable_prefix_caching is False
    assert s("--disable-prefix-caching").enable_prefix_caching is False     # vLLM <= 0.9
    assert s("--enable-chunked-prefill", "False").enable_chunked_prefill is False  # StoreBoolean
    assert s("--enable-chunked-prefill=true").enable_chunked_prefill is True
    assert s("--no-enforce-eager").enforce_eager is False
    assert s().async_scheduling is None
    assert s("--async-scheduling").async_scheduling is True
    assert s("--no-async-scheduling").async_scheduling is False


def test_later_flag_wins():
    assert s("-tp", "2", "--tensor-parallel-size", "4").tensor_parallel_size == 4


def test_speculative_forms():
    assert s("--speculative-config.num_speculative_tokens", "3").num_speculative_tokens == 3
    assert s("--speculative_config={\"num_speculative_tokens\": 2}").num_speculative_tokens == 2
    assert s("--num-speculative-tokens", "4").num_speculative_tokens == 4
    ng = s("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}')
    assert (ng.num_speculative_tokens, ng.speculative_method) == (3, "ngram")
    dotted = s("--speculative-config.method", "mtp",
               "--speculative-config.num_speculative_tokens", "2")
    assert (dotted.num_speculative_tokens, dotted.speculative_method) == (2, "mtp")


@pytest.mark.parametrize("argv", [
    ["--speculative-config", '{"method": "draft_model", "model": "q/small", '
                             '"num_speculative_tokens": 3}'],
    ["--speculative-config.method", "draft_model", "--speculative-config.model", "q/small",
     "--speculative-config.num_speculative_tokens", "3"],
])
def test_a_separate_drafter_is_read_and_written_back(argv):
    """The drafter ("model") is kept and written back inside the one --speculative-config."""
    st = s(*argv)
    assert (st.speculative_model, st.speculative_method, st.num_speculative_tokens) == \
        ("q/small", "draft_model", 3)
    args = settings_to_args(st)
    assert args[0] == "--speculative-config" and len(args) == 2
    assert json.loads(args[1]) == {"method": "draft_model", "model": "q/small",
                                   "num_speculative_tokens": 3}
    # NOTE: the same settings; the spellings as given are recorded as given
    again = s(*args)
    assert dataclasses.replace(again, flag_spellings=st.flag_spellings) == st
    assert {f for f, _ in st.flag_spellings} == {"--speculative-config"}


@pytest.mark.parametrize("argv, want, note", [
    (["--limit-mm-per-prompt", '{"image": 0, "video": 0}'], (("image", 0), ("video", 0)), None),
    (["--limit-mm-per-prompt", "video=0,image=2"], (("image", 2), ("video", 0)), None),
    (["--limit-mm-per-prompt.image", "0", "--limit-mm-per-prompt.video=0"],
     (("image", 0), ("video", 0)), None),
    (["--limit-mm-per-prompt", '{"image": {"count": 1, "width": 512, "height": 512}}'],
     (("image", 1),), "height, width (the dummy item's size) not modelled"),
    (["--limit-mm-per-prompt", "{}"], None, None),
])
def test_limit_mm_per_prompt_forms(argv, want, note):
    """JSON, the old key=value list, dotted keys (merged), 0.11.1's per-item objects; written
    back as one JSON object."""
    cmd = parse_vllm_args(["m", *argv])
    assert cmd.settings.limit_mm_per_prompt == want
    assert (note is None) == (not any("dummy item" in n for n in cmd.notes))
    if note:
        assert any(note in n for n in cmd.notes)
    if want:
        args = settings_to_args(cmd.settings)
        assert args == ["--limit-mm-per-prompt", json.dumps(dict(want))]
        assert parse_vllm_args(["m", *args]).settings.limit_mm_per_prompt == want


@pytest.mark.parametrize("argv, field, value", [
    (["--mm-encoder-tp-mode", "data"], "mm_encoder_tp_mode", "data"),
    (["--enable-multimodal-encoder-data-parallel"], "enable_multimodal_encoder_data_parallel",
     True),
])
def test_encoder_data_parallel_flags(argv, field, value):
    """--mm-encoder-tp-mode (0.10.2+) and the 0.9.1-0.12 switch are two flags, as in vLLM's
    EngineArgs (the planner reads the switch as "data"), each written back as given."""
    got = s(*argv)
    assert getattr(got, field) == value and got.user_set == {field}
    assert settings_to_args(got) == argv


def test_the_old_speculative_model_flag():
    """vLLM <= 0.9: --speculative-model + --num-speculative-tokens (written back as the one
    config of newer releases, not twice)."""
    st = s("--speculative-model", "q/small", "--num-speculative-tokens", "4")
    assert (st.speculative_model, st.num_speculative_tokens) == ("q/small", 4)
    args = settings_to_args(st)
    assert args == ["--speculative-config", '{"model": "q/small", "num_speculative_tokens": 4}']


def test_ignored_flags_are_accepted():
    cmd = parse_vllm_args(["m", "--host", "0.0.0.0", "--port", "8000", "--served-model-name",
                           "a", "b", "--api-key", "x", "--trust-remote-code",
                           "--download-dir", "/d", "--disable-log-requests", "-O3",
                           "--max-model-len", "4096", "--no-trust-remote-code", "--seed=1"])
    assert cmd.model == "m" and cmd.settings.max_model_len == 4096
    assert {"--host", "--port", "--served-model-name", "--api-key", "--trust-remote-code",
            "--download-dir"} <= set(cmd.ignored)
    assert "host" not in cmd.settings.user_set


def test_flags_of_releases_0_27_to_0_33_are_accepted():
    """Flags added in vLLM 0.27-0.33 (read in the released arg_utils.py): the 0.31+ alias
    --device-memory-utilization sets the utilization; the memory-relevant ones are noted,
    the others accepted (a pasted 0.33 command line used to stop at 'unknown flag')."""
    cmd = parse_vllm_args(["m", "--device-memory-utilization", "0.7", "--max-num-active-seqs",
                           "32", "--use-replayssm", "--replayssm-buffer-len", "8",
                           "--no-swa-bounded-replay", "--monokernel", "--log-level", "debug",
                           "--sleep-preserve-parameter-names", "a", "b", "-tp", "2",
                           "--enable-batch-sharded-sampling", "--watchdog-config", "{}"])
    assert cmd.settings.gpu_memory_utilization == 0.7
    assert "gpu_memory_utilization" in cmd.settings.user_set
    assert cmd.settings.tensor_parallel_size == 2 and cmd.model == "m"
    assert set(cmd.unmodeled) == {"--use-replayssm", "--replayssm-buffer-len",
                                  "--no-swa-bounded-replay", "--enable-batch-sharded-sampling"}
    assert {"--max-num-active-seqs", "--monokernel", "--log-level"} <= set(cmd.ignored)
    with pytest.raises(UsageError, match="0 < value <= 1"):
        parse_vllm_args(["m", "--device-memory-utilization", "1.5"])
    from vramguard.sources.vllm_args import command_with
    line = command_with(parse_vllm_command(["vllm", "serve", "m", "--device-memory-utilization",
                                            "0.95"]), {"gpu_memory_utilization": 0.9})
    assert line == "vllm serve m --gpu-memory-utilization 0.9"


def test_unknown_quantization_is_a_note():
    cmd = parse_vllm_args(["m", "-q", "my_plugin_quant"])
    assert cmd.settings.quantization == "my_plugin_quant"
    assert any("my_plugin_quant" in n for n in cmd.notes)


# ---- errors -----------------------------------------------------------------------------
@pytest.mark.parametrize("tokens,needle", [
    (["--max-modle-len", "5"], "--max-model-len"),
    (["--tensor-paralel-size", "2"], "--tensor-parallel-size"),
    (["--gpu-memory-utilization", "1.5"], "0 < value <= 1"),
    (["--gpu-memory-utilization", "0"], "0 < value <= 1"),
    (["--gpu-memory-utilization", "abc"], "a number"),
    (["--max-model-len", "2.5K"], "25.6k"),
    (["--max-model-len", "0"], ">= 1"),
    (["-tp", "0"], "1 to 4096"),
    (["-tp", "two"], "whole number"),
    (["--dtype", "bf16"], "bfloat16"),
    (["--kv-cache-dtype", "fp9"], "fp8"),
    (["--max-model-len"], "expected a value"),
    (["--cpu-offload-gb", "-1"], ">= 0"),
    (["--speculative-config", "{bad"], "JSON"),
    (["--speculative-config", '{"model": 3}'], "a model id or path"),
    (["--limit-mm-per-prompt", "lots"], "image=0,video=0"),
    (["--limit-mm-per-prompt", '{"image": -1}'], "0 to 1048576"),
    (["--limit-mm-per-prompt", '{"image": {"width": 5}}'], 'an object with a "count"'),
    (["--limit-mm-per-prompt", '{"a b": 1}'], "modality names"),
    (["--num-speculative-tokens", "1025"], "0 to 1024"),
    (["--spec-tokens", "1025"], "0 to 1024"),
    (["--enforce-eager=maybe"], "true or false"),
    (["m", "extra"], "unexpected argument"),
])
def test_bad_input_is_a_usage_error(tokens, needle):
    with pytest.raises(UsageError) as err:
        parse_vllm_args(tokens)
    line = err.value.line()
    assert needle in line and "\n" not in line


def test_bad_value_names_flag_and_value():
    with pytest.raises(UsageError) as err:
        parse_vllm_args(["--max-num-seqs", "-3"])
    assert "--max-num-seqs" in err.value.line() and "'-3'" in err.value.line()


def test_non_strict_collects_unknown():
    cmd = parse_vllm_command(["vllm", "serve", "m", "--frobnicate", "3", "-tp", "2"],
                             strict=False)
    assert cmd.unknown == ("--frobnicate",) and cmd.settings.tensor_parallel_size == 2


# ---- pasted commands --------------------------------------------------------------------
def test_vllm_serve_with_env():
    cmd = parse_vllm_command(["VLLM_USE_V1=1", "CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve",
                              "Qwen/Qwen2.5-7B-Instruct", "-tp", "2"])
    assert cmd.model == "Qwen/Qwen2.5-7B-Instruct"
    assert cmd.env == {"VLLM_USE_V1": "1", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert cmd.engine_hint == "v1" and cmd.launcher == "vllm serve"
    assert cmd.settings.tensor_parallel_size == 2


def test_unmodeled_env_is_noted():
    cmd = parse_vllm_command("VLLM_CPU_KVCACHE_SPACE=40 vllm serve m")
    assert cmd.env["VLLM_CPU_KVCACHE_SPACE"] == "40"
    assert any("VLLM_CPU_KVCACHE_SPACE=40" in n for n in cmd.notes)
    # modelled (plan(env=...)): no note
    cmd = parse_vllm_command("VLLM_PP_LAYER_PARTITION=20,12 vllm serve m -pp 2")
    assert cmd.env["VLLM_PP_LAYER_PARTITION"] == "20,12"
    assert not any("VLLM_PP_LAYER_PARTITION" in n for n in cmd.notes)
    cmd = parse_vllm_command("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve m --max-model-len 1m")
    assert cmd.env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] == "1"
    assert not any("VLLM_ALLOW_LONG_MAX_MODEL_LEN" in n for n in cmd.notes)


def test_one_string_with_continuations():
    text = ("VLLM_USE_V1=0 vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n"
            "  --max-model-len 16k \\\n  --gpu-memory-utilization 0.9 --port 8000\n")
    cmd = parse_vllm_command(text)
    assert cmd.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert cmd.settings.max_model_len == 16000 and cmd.engine_hint == "v0"
    assert parse_vllm_command([text]).settings == cmd.settings


@pytest.mark.parametrize("launcher", [
    ["python", "-m", "vllm.entrypoints.openai.api_server"],
    ["python3", "-m", "vllm.entrypoints.api_server"],
    ["/usr/bin/python3.11", "-u", "-m", "vllm.entrypoints.openai.api_server"],
])
def test_python_module_launchers(launcher):
    cmd = parse_vllm_command(launcher + ["--model", "facebook/opt-125m", "--max-num-seqs", "8"])
    assert cmd.model == "facebook/opt-125m" and cmd.settings.max_num_seqs == 8
    assert cmd.launcher.startswith("python -m")


def test_docker_run():
    cmd = parse_vllm_command(
        "docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:/root/.cache/huggingface "
        "--env HUGGING_FACE_HUB_TOKEN=hf_x -e VLLM_USE_V1=1 -p 8000:8000 --ipc=host --rm "
        "vllm/vllm-openai:v0.8.5 --model mistralai/Mistral-7B-v0.1 --max-model-len 8k")
    assert cmd.version_hint == "0.8.5" and cmd.launcher == "docker"
    assert cmd.model == "mistralai/Mistral-7B-v0.1" and cmd.settings.max_model_len == 8000
    assert cmd.env["HUGGING_FACE_HUB_TOKEN"] == "hf_x" and cmd.engine_hint == "v1"


def test_docker_latest_tag_and_positional_model():
    cmd = parse_vllm_command(["sudo", "docker", "run", "-it", "--gpus", "all",
                              "vllm/vllm-openai:latest", "Qwen/Qwen3-8B", "-tp", "1"])
    assert cmd.version_hint is None and cmd.model == "Qwen/Qwen3-8B"


@pytest.mark.parametrize("line,image", [
    ("python -m vllm.entrypoints.openai.api_server Qwen/Qwen3-8B --port 8000", False),
    ("docker run --gpus all vllm/vllm-openai:v0.8.5 Qwen/Qwen3-8B", True),
    ("docker run --gpus all vllm/vllm-openai:v0.11.0 Qwen/Qwen3-8B", True),
])
def test_a_positional_model_for_the_api_server_module(line, image):
    """The api_server module (the image's entry point up to 0.11.0) refuses a positional model
    before 0.10 and ignores it from 0.10 (only `vllm serve` reads model_tag)."""
    with pytest.raises(UsageError) as e:
        parse_vllm_command(line)
    assert e.value.what.startswith("unexpected argument 'Qwen/Qwen3-8B': ")
    assert ("the image's api_server entry point" in e.value.what) == image
    assert e.value.fix.startswith("write --model MODEL")


def test_the_image_runs_vllm_serve_from_0_11_1():
    line = "docker run --gpus all vllm/vllm-openai:v0.11.1 Qwen/Qwen3-8B"
    assert parse_vllm_command(line).model == "Qwen/Qwen3-8B"


def test_positional_model_wins_over_flag():
    assert parse_vllm_command(["vllm", "serve", "a", "--model", "b"]).model == "a"


def test_not_a_server_command():
    with pytest.raises(UsageError):
        parse_vllm_command(["vllm", "bench", "latency"])
    with pytest.raises(UsageError):
        parse_vllm_command(["python", "-m", "http.server"])
    with pytest.raises(UsageError):
        parse_vllm_command("vllm serve 'unclosed")


# ---- YAML -------------------------------------------------------------------------------
def test_config_yaml_and_cli_wins(tmp_path):
    cfg = tmp_path / "serve.yaml"
    cfg.write_text("model: Qwen/Qwen3-8B\ntensor-parallel-size: 2\nmax_model_len: 32k\n"
                   "gpu-memory-utilization: 0.8\nenforce-eager: true\n"
                   "enable-prefix-caching: false\nport: 8000\n"
                   "speculative-config:\n  num_speculative_tokens: 2\n")
    cmd = parse_vllm_command(["vllm", "serve", "--config", str(cfg), "-tp", "4"])
    st = cmd.settings
    assert cmd.model == "Qwen/Qwen3-8B" and cmd.config_file == str(cfg)
    assert st.tensor_parallel_size == 4            # the command line wins
    assert st.max_model_len == 32000 and st.gpu_memory_utilization == 0.8
    assert st.enforce_eager and st.enable_prefix_caching is False
    assert st.num_speculative_tokens == 2
    assert "--port" in cmd.ignored


def test_config_yaml_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("max-model-len: [1, 2\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        parse_vllm_args(["--config", str(bad)])
    typo = tmp_path / "typo.yaml"
    typo.write_text("max-modle-len: 4096\n")
    with pytest.raises(UsageError, match="--max-model-len"):
        parse_vllm_args(["--config", str(typo)])
    with pytest.raises(UsageError, match="yaml"):
        parse_vllm_args(["--config", str(tmp_path / "x.json")])
    with pytest.raises(UsageError, match="cannot read"):
        parse_vllm_args(["--config", str(tmp_path / "missing.yaml")])


def test_config_yaml_not_utf8_names_the_file(tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"max-model-len: \xff\xfe\x80\n")
    with pytest.raises(UsageError) as e:
        parse_vllm_args(["--config", str(binary)])
    assert e.value.where == "--config" and e.value.what == f"{binary} is not UTF-8 text"


def test_config_yaml_nested_too_deeply(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("speculative-config: " + "[" * 30000 + "]" * 30000 + "\n")
    with pytest.raises(UsageError, match="nested too deeply") as e:
        parse_vllm_args(["--config", str(deep)])
    assert e.value.where == "--config" and str(deep) in e.value.what


_DEEP = ["[" * 30000 + "]" * 30000, '{"a":' * 12000 + "1" + "}" * 12000]


@pytest.mark.parametrize("flag", ["--speculative-config", "--hf-overrides", "--rope-scaling",
                                  "--hf-overrides.text_config"])
@pytest.mark.parametrize("deep", _DEEP, ids=["list", "object"])
def test_deeply_nested_json_flags_are_usage_errors(flag, deep):
    with pytest.raises(UsageError) as e:
        parse_vllm_args(["m", flag, deep])
    assert e.value.where == flag and e.value.what == "not valid JSON (nested too deeply)"


# ---- mappings (log `non-default args`) ---------------------------------------------------
def test_settings_from_mapping():
    st = settings_from_mapping({
        "model_tag": "Qwen/Qwen3-8B", "model": "Qwen/Qwen3-8B", "max_model_len": 8192,
        "gpu_memory_utilization": 0.95, "enable_prefix_caching": False, "host": "0.0.0.0",
        "speculative_config": {"method": "eagle", "num_speculative_tokens": 3},
        "tensor-parallel-size": 2, "kv_cache_dtype": "fp8", "enforce_eager": True,
        "api_server_count": 1, "max_num_batched_tokens": "16k"})
    assert st.model == "Qwen/Qwen3-8B" and st.max_model_len == 8192
    assert st.gpu_memory_utilization == 0.95 and st.enable_prefix_caching is False
    assert st.num_speculative_tokens == 3 and st.tensor_parallel_size == 2
    assert st.kv_cache_dtype == "fp8" and st.enforce_eager
    assert st.max_num_batched_tokens == 16000
    assert "host" not in st.user_set and "max_model_len" in st.user_set


def test_settings_from_mapping_bad_value():
    with pytest.raises(UsageError, match="gpu-memory-utilization"):
        settings_from_mapping({"gpu_memory_utilization": 2})


# ---- back to a command line -------------------------------------------------------------
def test_settings_to_args_roundtrip():
    cmd = parse_vllm_args(["m", "-tp", "2", "--max-model-len", "auto", "--enforce-eager",
                           "--no-enable-prefix-caching", "--gpu-memory-utilization", "0.9"])
    args = settings_to_args(cmd.settings, {"--max-model-len": 8192, "enforce_eager": False})
    again = parse_vllm_args(["m"] + args).settings
    assert again.tensor_parallel_size == 2 and again.max_model_len == 8192
    assert not again.enforce_eager and again.enable_prefix_caching is False
    assert again.gpu_memory_utilization == 0.9
    line = format_command("m", args)
    assert line.startswith("vllm serve m ") and "--max-model-len 8192" in line


def test_default_settings_untouched():
    assert parse_vllm_args([]).settings == Settings()


def test_unmodeled_memory_flags_are_noted():
    cmd = parse_vllm_args(["m", "--max-cudagraph-capture-size", "256", "--enable-cumem-allocator",
                           "--limit-mm-per-prompt", '{"image": 2}', "-O", "3", "--port", "1",
                           "--fully-sharded-loras"])
    assert cmd.model == "m"
    assert set(cmd.unmodeled) == {"--enable-cumem-allocator"}
    assert cmd.settings.fully_sharded_loras                     # modelled (LoRA slots / TP)
    assert cmd.settings.max_cudagraph_capture_size == 256      # modelled (0.11.1+)
    assert cmd.settings.limit_mm_per_prompt == (("image", 2),)  # read (0 turns the tower off)
    assert cmd.settings.optimization_level == 3                # modelled: -O N
    assert "--port" in cmd.ignored and "--port" not in cmd.unmodeled
    assert any("not modeled" in n and "--enable-cumem-allocator" in n for n in cmd.notes)


def test_multi_value_ignored_flags_and_spec_tokens():
    cmd = parse_vllm_args(["m", "--cudagraph-capture-sizes", "1", "2", "4", "--spec-tokens",
                           "2", "--served-model-name", "x", "y", "-tp", "2"])
    assert cmd.settings.tensor_parallel_size == 2 and cmd.settings.num_speculative_tokens == 2
    assert cmd.settings.cudagraph_capture_sizes == (1, 2, 4)


@pytest.mark.parametrize("argv, fields", [
    (["-O0"], {"optimization_level": 0}),
    (["-O", "3"], {"optimization_level": 3}),
    (["-O=1"], {"optimization_level": 1}),
    (["--optimization-level", "0"], {"optimization_level": 0}),
    (["-O.level=0"], {"compilation_mode": 0}),                      # 0.9.2-0.12 dotted
    (["-O.cudagraph_mode", "none"], {"cudagraph_mode": "NONE"}),
    (["-O", '{"level": 3, "cudagraph_mode": "piecewise"}'],
     {"compilation_mode": 3, "cudagraph_mode": "PIECEWISE"}),
    (["-cc", '{"cudagraph_mode": "FULL_DECODE_ONLY"}'], {"cudagraph_mode": "FULL_DECODE_ONLY"}),
    (["-cc.mode", "0"], {"compilation_mode": 0}),
    (["--compilation-config.cudagraph_mode=NONE"], {"cudagraph_mode": "NONE"}),
    (["--compilation-config", "0"], {"compilation_mode": 0}),        # <= 0.9.1: a level
    (["--compilation_config", '{"use_cudagraph": false}'], {"cudagraph_mode": "NONE"}),
    (["-cc", '{"full_cuda_graph": true}'], {"cudagraph_mode": "FULL"}),
    (["-cc", '{"mode": "VLLM_COMPILE", "cudagraph_capture_sizes": [1, 2, 4, 4]}'],
     {"compilation_mode": 3, "cudagraph_capture_sizes": (1, 2, 4, 4)}),
    (["-cc", '{"max_cudagraph_capture_size": 128}'], {"max_cudagraph_capture_size": 128}),
    (["--cuda-graph-sizes=64"], {"cuda_graph_sizes": (64,)}),
    (["--cuda-graph-sizes", "8", "16", "-tp", "2"], {"cuda_graph_sizes": (8, 16)}),
    (["--performance-mode", "interactivity"], {"performance_mode": "interactivity"}),
])
def test_compilation_flags(argv, fields):
    """-O, --optimization-level, --compilation-config / -cc (JSON, dotted, an old level
    number) and the capture-size lists set the fields the CUDA-graph model reads, each one
    recorded as the user's (a tuned command writes it back)."""
    s = parse_vllm_args(["m", *argv]).settings
    assert {k: getattr(s, k) for k in fields} == fields
    assert set(fields) <= s.user_set


def test_compilation_config_other_keys_are_a_note_and_written_back():
    from vramguard.sources.vllm_args import settings_to_args
    cmd = parse_vllm_args(["m", "-cc", '{"cudagraph_mode": "PIECEWISE", "pass_config": {}}',
                           "-O0", "--cudagraph-capture-sizes", "1", "2"])
    assert any("pass_config" in n and "not modelled" in n for n in cmd.notes)
    args = settings_to_args(cmd.settings)
    again = parse_vllm_args(["m", *args]).settings
    assert (again.cudagraph_mode, again.optimization_level, again.cudagraph_capture_sizes) == \
        ("PIECEWISE", 0, (1, 2))
    mapped = settings_from_mapping({"compilation_config": {"cudagraph_mode": "NONE", "level": 0}})
    assert (mapped.cudagraph_mode, mapped.compilation_mode) == ("NONE", 0)
    assert {"cudagraph_mode", "compilation_mode"} <= mapped.user_set


@pytest.mark.parametrize("argv, where", [
    (["-O", "9"], "-O"), (["-O"], "-O"), (["-O", "{bad"], "-O"),
    (["-cc", '{"cudagraph_mode": "fast"}'], "--compilation-config.cudagraph_mode"),
    (["-cc", '{"mode": 7}'], "--compilation-config.mode"),
    (["--cudagraph-capture-sizes"], "--cudagraph-capture-sizes"),
    (["--cudagraph-capture-sizes", "0"], "--cudagraph-capture-sizes"),
    (["-cc", "[1]"], "--compilation-config"),
    (["--performance-mode", "fast"], "--performance-mode"),
])
def test_bad_compilation_flags(argv, where):
    with pytest.raises(UsageError) as e:
        parse_vllm_args(["m", *argv])
    assert e.value.where == where and "\n" not in e.value.line()


def test_command_with_keeps_the_users_line():
    from vramguard.sources.vllm_args import command_with
    cmd = parse_vllm_command(
        "VLLM_USE_V1=1 vllm serve m -tp 2 --max_model_len=32k --port 8000 "
        "--speculative-config '{\"method\": \"eagle\", \"model\": \"d\", "
        "\"num_speculative_tokens\": 3}' --no-enforce-eager")
    line = command_with(cmd, {"--max-model-len": "16384", "--tensor-parallel-size": "4",
                              "--enforce-eager": ""})
    assert line.startswith("VLLM_USE_V1=1 vllm serve m ")
    assert "--max_model_len" not in line and "-tp 2" not in line
    assert "--no-enforce-eager" not in line
    assert line.endswith("--max-model-len 16384 --tensor-parallel-size 4 --enforce-eager")
    assert "--port 8000" in line and '"method": "eagle"' in line
    again = parse_vllm_command(line)
    assert again.settings.max_model_len == 16384 and again.settings.tensor_parallel_size == 4
    assert again.settings.enforce_eager and again.settings.num_speculative_tokens == 3


def test_command_with_docker_and_flags_only():
    from vramguard.sources.vllm_args import command_with
    cmd = parse_vllm_command(["docker", "run", "--gpus", "all", "vllm/vllm-openai:v0.9.2",
                              "--model", "m", "--gpu-memory-utilization", "0.95"])
    line = command_with(cmd, {"gpu_memory_utilization": 0.9})
    assert line == ("docker run --gpus all vllm/vllm-openai:v0.9.2 --model m "
                    "--gpu-memory-utilization 0.9")
    flags_only = parse_vllm_args(["m", "--kv-cache-memory", "8G"])
    assert command_with(flags_only, {"--kv-cache-memory-bytes": "1000"}) == \
        "vllm serve m --kv-cache-memory-bytes 1000"
    assert command_with(flags_only) == "vllm serve m --kv-cache-memory 8G"


# ---- fuzz: any input is parsed or refused with a UsageError, never a crash ----------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from vramguard.sources.vllm_flags import FLAGS as _FLAGS, IGNORED_VALUE  # noqa: E402

_TOKENS = st.one_of(
    st.sampled_from(sorted(_FLAGS) + ["-tp", "-pp", "-q", "-O", "--", "--no-enable-lora",
                                      "--port", "--served-model-name", "-O3", "vllm", "serve",
                                      "docker", "run", "python", "-m", "A=1"]
                    + sorted(IGNORED_VALUE)[:20]),
    st.sampled_from(["auto", "-1", "0", "1", "2", "25.6k", "32K", "1.5G", "0.9", "true",
                     "False", "{}", '{"num_speculative_tokens": 2}', "fp8", "awq", "x.yaml"]),
    st.text(max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKENS, max_size=10))
def test_fuzz_parse_never_crashes(tokens):
    for fn in (parse_vllm_args, parse_vllm_command):
        try:
            cmd = fn(tokens)
        except UsageError as exc:
            assert "\n" not in exc.line()
        else:
            assert isinstance(cmd.settings, Settings)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_fuzz_pasted_string(text):
    try:
        parse_vllm_command(text)
    except UsageError:
        pass


@pytest.mark.parametrize("image,version", [
    ("vllm/vllm-openai:v0.8.5", "0.8.5"), ("vllm/vllm-openai:v0.10.1.1", "0.10.1.1"),
    ("docker.io/vllm/vllm-openai:v0.9.2-cu128", "0.9.2"), ("vllm/vllm-openai:latest", None),
    ("localhost:5000/vllm-openai", None), ("vllm/vllm-openai:nightly", None),
])
def test_docker_tags(image, version):
    cmd = parse_vllm_command(["docker", "run", "--rm", "-it", "-p", "8000:8000", image,
                              "--model", "m"])
    assert cmd.version_hint == version and cmd.model == "m"


@pytest.mark.parametrize("image,version", [
    ("nvcr.io/nvidia/vllm:25.11-py3", None), ("lmcache/vllm-openai:v0.3.9", None),
    ("myorg/llm-server:1.2", None), ("vllm/vllm-openai-rocm:v0.9.2", "0.9.2"),
    ("123.dkr.ecr.us-east-1.amazonaws.com/vllm-openai:v0.10.2", "0.10.2"),
    ("localhost:5000/vllm/vllm-openai:v0.8.5", "0.8.5"),
])
def test_only_vllms_own_images_name_the_release(image, version):
    cmd = parse_vllm_command(["docker", "run", image, "--model", "m"])
    assert cmd.version_hint == version and cmd.model == "m"
    foreign = [n for n in cmd.notes if "is not read as a vLLM release" in n]
    assert bool(foreign) == (version is None)


@pytest.mark.parametrize("line", [
    "docker run --gpus all --entrypoint vllm vllm/vllm-openai:v0.8.5 serve m --max-model-len 4096",
    "docker run --gpus all --entrypoint=python3 vllm/vllm-openai:v0.8.5 -m "
    "vllm.entrypoints.openai.api_server --model m --max-model-len 4096",
])
def test_docker_entrypoint_replaces_the_images_own(line):
    cmd = parse_vllm_command(line)
    assert cmd.model == "m" and cmd.settings.max_model_len == 4096
    assert cmd.version_hint == "0.8.5" and cmd.launcher == "docker"
    assert command_with(cmd, {"max_model_len": 2048}) == line.replace("4096", "2048")


def test_config_overrides():
    """--hf-overrides / --rope-scaling / --rope-theta change the model's config (vLLM applies
    them to the HF config); they are collected, not reported as unmodeled."""
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    cmd = parse_vllm_args(["m", "--hf-overrides", json.dumps({"max_position_embeddings": 65536}),
                           "--rope-scaling", json.dumps(yarn), "--rope-theta=1e6"])
    assert cmd.config_overrides == {"max_position_embeddings": 65536, "rope_scaling": yarn,
                                    "rope_theta": 1e6}
    assert not cmd.unmodeled
    dotted = parse_vllm_args(["m", "--hf-overrides.max_position_embeddings", "131072"])
    assert dotted.config_overrides == {"max_position_embeddings": 131072}
    line = parse_vllm_command("vllm serve m --hf_overrides '{\"rope_theta\": 5}'")
    assert line.config_overrides == {"rope_theta": 5}
    for bad in (["--hf-overrides", "{bad"], ["--hf-overrides", "[1]"], ["--rope-theta", "x"]):
        with pytest.raises(UsageError) as e:
            parse_vllm_args(["m", *bad])
        assert bad[0] in str(e.value.where)


def test_config_override_flags_are_kept_and_written_back(tmp_path):
    """The model-config flags stay in the Settings as given (for the release's flag check
    and the commands written back): --hf-overrides once, merged; the others as given."""
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    cmd = parse_vllm_args(["m", "--rope-scaling", json.dumps(yarn),
                           "--hf-overrides", '{"max_position_embeddings": 131072}',
                           "--hf-overrides.rope_theta", "5", "--max-model-len", "131072"])
    st = cmd.settings
    assert st.config_overrides == (
        ("--rope-scaling", json.dumps(yarn)),
        ("--hf-overrides", '{"max_position_embeddings": 131072}'),
        ("--hf-overrides", '{"rope_theta": 5}'))
    assert "config_overrides" in st.user_set
    args = settings_to_args(st)
    i = args.index("--hf-overrides")
    assert json.loads(args[i + 1]) == {"max_position_embeddings": 131072, "rope_theta": 5}
    assert json.loads(args[args.index("--rope-scaling") + 1]) == yarn
    again = parse_vllm_args(["m", *args])
    assert again.config_overrides == cmd.config_overrides
    # a pasted line and more flags: both sets are on the command line
    both = parse_vllm_command(["vllm serve m --rope-theta 7", "--hf-overrides.a", "1"])
    assert [f for f, _ in both.settings.config_overrides] == ["--rope-theta", "--hf-overrides"]
    assert parse_vllm_args(["m"]).settings.config_overrides == ()


def test_multimodal_switches_are_read():
    """--language-model-only and --skip-mm-profiling change the plan (no longer 'not modeled')."""
    from vramguard.sources.vllm_args import parse_vllm_args
    cmd = parse_vllm_args(["Qwen/Qwen2.5-VL-7B-Instruct", "--language-model-only",
                           "--skip-mm-profiling"])
    assert cmd.settings.language_model_only and cmd.settings.skip_mm_profiling
    assert not cmd.unmodeled


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "abc"])
def test_rope_theta_must_be_a_positive_number(value):
    with pytest.raises(UsageError, match="is not a positive number"):
        parse_vllm_args(["m", "--rope-theta", value])
    assert parse_vllm_args(["m", "--rope-theta", "1e6"]).config_overrides == {"rope_theta": 1e6}


def test_config_yaml_value_errors_name_the_file_and_the_yaml_fix(tmp_path):
    cfg = tmp_path / "bool.yaml"
    cfg.write_text("max-model-len: true\n")
    with pytest.raises(UsageError) as info:
        parse_vllm_args(["m", "--config", str(cfg)])
    assert info.value.where == f"--config {cfg}"
    assert info.value.what == "--max-model-len: expected a value after it"
    assert "YAML file" in info.value.fix and "Write" not in info.value.fix
    cfg.write_text("tensor-parallel-size: 2.5\n")
    with pytest.raises(UsageError) as info:
        parse_vllm_args(["m", "--config", str(cfg)])
    assert info.value.where == f"--config {cfg}" and "whole number" in info.value.fix


def test_mamba_dtype_flags():
    s = parse_vllm_args(["m", "--mamba-cache-dtype", "float32",
                         "--mamba_ssm_cache_dtype=bfloat16"]).settings
    assert (s.mamba_cache_dtype, s.mamba_ssm_cache_dtype) == ("float32", "bfloat16")
    assert {"mamba_cache_dtype", "mamba_ssm_cache_dtype"} <= s.user_set
    with pytest.raises(UsageError, match="float32"):
        parse_vllm_args(["m", "--mamba-ssm-cache-dtype", "fp32"])


def test_kv_cache_dtype_skip_layers_takes_every_value_and_round_trips():
    cmd = parse_vllm_args(["m", "--kv-cache-dtype", "turboquant_4bit_nc",
                           "--kv-cache-dtype-skip-layers", "0", "1", "sliding_window", "-tp", "2"])
    assert cmd.settings.kv_cache_dtype_skip_layers == ("0", "1", "sliding_window")
    assert cmd.settings.tensor_parallel_size == 2 and not cmd.unmodeled
    again = parse_vllm_args(["m", *settings_to_args(cmd.settings)]).settings
    assert again.kv_cache_dtype_skip_layers == ("0", "1", "sliding_window")
    assert settings_from_mapping({"kv_cache_dtype_skip_layers": [0, 31]}) \
        .kv_cache_dtype_skip_layers == ("0", "31")
    for bad in ("0,1", "1²"):
        with pytest.raises(UsageError, match="layer indices"):
            parse_vllm_args(["m", "--kv-cache-dtype-skip-layers", bad])


def test_speculative_spellings_recorded_as_given():
    """Every spelling sets the same fields; the flags are kept as given, in order, for the
    release's flag check (--spec-method / --spec-model are read, 0.22+)."""
    st = s("--spec-method", "NGRAM", "--spec-tokens", "3")
    assert (st.speculative_method, st.num_speculative_tokens) == ("ngram", 3)
    assert st.flag_spellings == (("--spec-method", "NGRAM"), ("--spec-tokens", "3"))
    assert "flag_spellings" in st.user_set
    old = s("--speculative-model", "[ngram]", "--num-speculative-tokens", "4")
    assert (old.speculative_model, old.num_speculative_tokens) == ("[ngram]", 4)
    assert [f for f, _ in old.flag_spellings] == ["--speculative-model",
                                                     "--num-speculative-tokens"]
    assert s("--spec-model", "q/small").speculative_model == "q/small"
    assert s("--max-model-len", "4096").flag_spellings == ()


NGRAM3 = '{"method": "ngram", "num_speculative_tokens": 3}'


@pytest.mark.parametrize("argv, version, want", [
    (["--speculative-config", NGRAM3], "0.8.2", ["--speculative-config", NGRAM3]),
    (["--speculative-config", NGRAM3], "0.7.3",
     ["--speculative-model", "[ngram]", "--num-speculative-tokens", "3"]),
    (["--spec-method", "ngram", "--spec-tokens", "3"], None,
     ["--spec-method", "ngram", "--spec-tokens", "3"]),
    (["--spec-method", "ngram", "--spec-tokens", "3"], "0.21.0", ["--speculative-config", NGRAM3]),
    (["--speculative-model", "q/small", "--num-speculative-tokens", "2"], "0.6.3",
     ["--speculative-model", "q/small", "--num-speculative-tokens", "2"]),
    (["--speculative-model", "q/small", "--num-speculative-tokens", "2"], None,
     ["--speculative-config", '{"model": "q/small", "num_speculative_tokens": 2}']),
])
def test_speculative_written_in_the_releases_spelling(argv, version, want):
    """A recommended command names speculative decoding the way its release spells it."""
    assert settings_to_args(s(*argv), version=version) == want


def test_pooling_runner_flags_are_read():
    from vramguard.sources.vllm_args import parse_vllm_command
    cmd = parse_vllm_command("vllm serve Qwen/Qwen3-Embedding-8B --runner pooling --convert embed")
    assert (cmd.settings.runner, cmd.settings.convert) == ("pooling", "embed")
    assert parse_vllm_command("vllm serve m --task embed").settings.task == "embed"
