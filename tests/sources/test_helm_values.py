"""The vLLM production-stack chart's values down to the launch its templates render
(sources/helm_values.py; values written in the shapes of the chart's own examples)."""

import json

import pytest

from vramguard.errors import UsageError
from vramguard.sources.helm_values import launch_from_helm_values
from vramguard.sources.vllm_args import parse_vllm_command
from vramguard.sources.vllm_args import load_yaml_documents

VALUES = """\
servingEngineSpec:
  runtimeClassName: ""
  modelSpec:
  - name: "llama3"
    repository: "vllm/vllm-openai"
    tag: "v0.8.5"
    modelURL: "meta-llama/Llama-3.1-8B-Instruct"
    replicaCount: 1
    requestCPU: 10
    requestMemory: "16Gi"
    requestGPU: 1
    pvcStorage: "50Gi"
    vllmConfig:
      enableChunkedPrefill: false
      maxModelLen: 16384
      dtype: "bfloat16"
      gpuMemoryUtilization: 0.8
      extraArgs: ["--disable-log-requests", "--kv-cache-dtype", "fp8"]
    env:
      - name: VLLM_LOGGING_LEVEL
        value: DEBUG
  - name: "mistral"
    repository: "vllm/vllm-openai"
    tag: "latest"
    modelURL: "mistralai/Mistral-7B-Instruct-v0.2"
routerSpec:
  repository: "lmcache/lmstack-router"
"""


def values(text=VALUES):
    return load_yaml_documents(text, "test")[0]


def test_the_deployment_template_flags_and_the_images_release():
    words, notes = launch_from_helm_values(values())
    assert words == ["docker", "run", "-e", "VLLM_LOGGING_LEVEL=DEBUG", "--entrypoint", "vllm",
                     "vllm/vllm-openai:v0.8.5", "serve", "meta-llama/Llama-3.1-8B-Instruct",
                     "--no-enable-chunked-prefill", "--no-enable-prefix-caching",
                     "--max-model-len", "16384", "--dtype", "bfloat16",
                     "--gpu-memory-utilization", "0.8", "--disable-log-requests",
                     "--kv-cache-dtype", "fp8"]
    assert "'llama3'" in notes[0] and "a Deployment" in notes[0]
    assert "'mistral'" in notes[1] and "the first is planned" in notes[1]
    cmd = parse_vllm_command(VALUES)
    assert cmd.model == "meta-llama/Llama-3.1-8B-Instruct" and cmd.version_hint == "0.8.5"
    s = cmd.settings
    assert (s.max_model_len, s.gpu_memory_utilization, s.kv_cache_dtype, s.dtype) == \
        (16384, 0.8, "fp8", "bfloat16")
    assert s.enable_chunked_prefill is False and cmd.env == {"VLLM_LOGGING_LEVEL": "DEBUG"}


def test_the_ray_script_and_an_untagged_image():
    ray = VALUES.replace('    pvcStorage: "50Gi"\n', '    raySpec:\n      headNode:\n'
                         '        requestGPU: 1\n').replace('tag: "v0.8.5"', 'tag: "latest"')
    ray = ray.replace("      maxModelLen: 16384\n", "      maxModelLen: 16384\n"
                      "      tensorParallelSize: 2\n      pipelineParallelSize: 2\n"
                      "      enablePrefixCaching: true\n      v0: \"1\"\n")
    words, notes = launch_from_helm_values(values(ray))
    assert words[:4] == ["VLLM_USE_V1=0", "VLLM_LOGGING_LEVEL=DEBUG", "vllm", "serve"]
    assert words[-2:] == ["--distributed-executor-backend", "ray"]
    assert "--enable-prefix-caching" in words and "--no-enable-prefix-caching" not in words
    assert "a RayCluster" in notes[0]
    cmd = parse_vllm_command(ray)
    assert cmd.version_hint is None and cmd.settings.pipeline_parallel_size == 2
    assert cmd.settings.tensor_parallel_size == 2


def test_the_deployment_ignores_ray_only_keys_and_writes_lora_tools_and_lmcache():
    text = VALUES.replace("      maxModelLen: 16384\n", "      maxModelLen: 16384\n"
                          "      pipelineParallelSize: 2\n      maxLoras: 4\n")
    text = text.replace('    replicaCount: 1\n', '    replicaCount: 1\n    enableLoRA: true\n'
                        '    enableTool: true\n    toolCallParser: "llama3_json"\n'
                        '    lmcacheConfig:\n      enabled: true\n', 1)
    words, _ = launch_from_helm_values(values(text))
    assert "--pipeline-parallel-size" not in words
    assert words[words.index("--max-loras") + 1] == "4" and "--enable-lora" in words
    assert words[words.index("--tool-call-parser") + 1] == "llama3_json"
    kv = json.loads(words[words.index("--kv-transfer-config") + 1])
    assert kv == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


@pytest.mark.parametrize("text,match", [
    ("servingEngineSpec:\n  modelSpec: []\n", "no model under servingEngineSpec.modelSpec"),
    ("servingEngineSpec:\n  modelSpec:\n  - name: a\n    enabled: false\n    modelURL: m\n",
     "no model"),
    ("servingEngineSpec:\n  modelSpec:\n  - name: a\n    repository: r\n", "has no modelURL"),
])
def test_values_without_a_model_to_plan(text, match):
    with pytest.raises(UsageError, match=match):
        parse_vllm_command(text)
