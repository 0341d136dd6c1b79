"""Pasted Kubernetes manifests and compose files down to their vLLM launch
(sources/manifests.py; written here in the shapes deployments use)."""

import pytest

from vramguard.errors import UsageError
from vramguard.sources.manifests import launch_from_manifest, looks_like_manifest
from vramguard.sources.vllm_args import parse_vllm_command

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
spec:
  template:
    spec:
      initContainers:
        - name: fetch
          image: busybox
          command: ["sh", "-c", "echo vllm"]
      containers:
        - name: sidecar
          image: nginx:1.25
        - name: server
          image: vllm/vllm-openai:v0.10.1
          env:
            - name: VLLM_USE_V1
              value: "1"
            - name: HF_TOKEN
              valueFrom: {secretKeyRef: {name: hf, key: token}}
          command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
          args: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "-tp", "2"]
"""


def test_a_deployments_container_command_and_args():
    words, notes = launch_from_manifest(DEPLOYMENT)
    # NOTE: `command` replaces the image's entry point; the docker form keeps the tag's release
    assert words == ["docker", "run", "-e", "VLLM_USE_V1=1", "--entrypoint", "python3",
                     "vllm/vllm-openai:v0.10.1", "-m", "vllm.entrypoints.openai.api_server",
                     "--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", "-tp", "2"]
    assert notes == ["read from the Deployment's container 'server'"]
    cmd = parse_vllm_command(DEPLOYMENT)
    assert cmd.model == "Qwen/Qwen2.5-7B-Instruct" and cmd.settings.tensor_parallel_size == 2
    assert cmd.env == {"VLLM_USE_V1": "1"} and cmd.notes[0].startswith("read from")
    assert cmd.version_hint == "0.10.1"
    untagged = parse_vllm_command(DEPLOYMENT.replace(":v0.10.1", ":latest"))
    assert untagged.version_hint is None and untagged.launcher.startswith("python -m")
    assert untagged.env == {"VLLM_USE_V1": "1"}


def test_a_shell_script_and_the_images_own_entry_point():
    sh = DEPLOYMENT.replace(
        '          command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n'
        '          args: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192", '
        '"-tp", "2"]\n',
        '          command: ["/bin/sh", "-c"]\n'
        '          args: ["pip list | grep vllm; vllm serve Qwen/Qwen2.5-7B-Instruct --port 80"]\n')
    assert launch_from_manifest(sh)[0][-5:] == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct",
                                                "--port", "80"]
    image_only = DEPLOYMENT.replace(
        '          command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n', "")
    cmd = parse_vllm_command(image_only)
    assert cmd.launcher == "docker" and cmd.version_hint == "0.10.1"
    assert cmd.model == "Qwen/Qwen2.5-7B-Instruct"


COMPOSE = """\
name: llm
services:
  db:
    image: postgres:16
  vllm:
    image: vllm/vllm-openai:latest
    command: >
      --model ${MODEL:-Qwen/Qwen3-8B}
      --max-model-len 4096
      --gpu-memory-utilization ${GPU_UTIL}
    environment:
      VLLM_LOGGING_LEVEL: DEBUG
"""


def test_a_compose_service_with_interpolation():
    words, notes = launch_from_manifest(COMPOSE)
    assert words == ["docker", "run", "-e", "VLLM_LOGGING_LEVEL=DEBUG", "vllm/vllm-openai:latest",
                     "--model", "Qwen/Qwen3-8B", "--max-model-len", "4096",
                     "--gpu-memory-utilization", "${GPU_UTIL}"]
    assert notes == ["read from the compose service 'vllm'"]
    with pytest.raises(UsageError) as e:
        parse_vllm_command(COMPOSE)               # the variable the file does not set
    assert "${GPU_UTIL} is a variable the pasted text does not set" in e.value.fix


def test_what_is_not_a_manifest_or_runs_no_vllm():
    assert not looks_like_manifest("max-model-len: 4096\ngpu-memory-utilization: 0.9\n")
    assert not looks_like_manifest("export A=1\nvllm serve m\n")
    with pytest.raises(UsageError, match="no container or service in the pasted YAML runs vLLM"):
        launch_from_manifest("services:\n  db:\n    image: postgres\n")
    with pytest.raises(UsageError, match=r"not valid YAML \(line \d+\)"):
        launch_from_manifest("services:\n  a: [\n    containers: {\n")


def test_a_pasted_vllm_config_file_and_yaml_that_is_none_of_these():
    config = ("# a recipe's config\nkv-cache-dtype: fp8\nno-enable-prefix-caching: true\n"
              "max-num-batched-tokens: 8192\nspeculative-config: '{\"method\": \"ngram\", "
              "\"num_speculative_tokens\": 3}'\n")
    cmd = parse_vllm_command(config)
    assert cmd.settings.kv_cache_dtype == "fp8" and cmd.settings.max_num_batched_tokens == 8192
    assert cmd.settings.num_speculative_tokens == 3
    assert cmd.notes[0] == "read as a vLLM --config file (flag: value)"
    assert parse_vllm_command("model: Qwen/Qwen3-8B\nmax-model-len: 4096\n").model == \
        "Qwen/Qwen3-8B"
    other = "routerSpec:\n  replicaCount: 1\nservice:\n  port: 80\n"
    with pytest.raises(UsageError, match="not a vLLM --config file"):
        parse_vllm_command(other)
    assert not looks_like_manifest(config)
    from vramguard.sources.manifests import looks_like_yaml
    indented = "    # start the server\n    vllm serve m \\\n      --port 8000\n"
    assert not looks_like_yaml(indented)             # an indented shell snippet
    assert parse_vllm_command(indented).model == "m"
