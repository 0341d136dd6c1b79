"""The values of vLLM's production-stack Helm chart, down to the vLLM launch they render.

The chart (github.com/vllm-project/production-stack, `helm/`) lists the models under
`servingEngineSpec.modelSpec`; each becomes a Deployment whose container runs
`vllm serve <modelURL>` (templates/deployment-vllm-multi.yaml) or, with a `raySpec`, a
RayCluster whose head runs the same command from a start script with
`--distributed-executor-backend ray` (templates/ray-cluster.yaml). The camelCase
`vllmConfig` keys become vLLM flags the way those templates write them:

    enableChunkedPrefill  --enable-chunked-prefill / --no-enable-chunked-prefill (when set)
    enablePrefixCaching   --enable-prefix-caching; when false or absent the Deployment
                          writes --no-enable-prefix-caching, the Ray script nothing
    maxModelLen, dtype, tensorParallelSize, maxNumSeqs, gpuMemoryUtilization, maxLoras
                          --max-model-len, --dtype, ... with the value
    pipelineParallelSize, revision   (Ray script only)
    extraArgs             appended as they are
    v0: "1"               VLLM_USE_V1=0 (Deployment); the Ray script sets VLLM_USE_V1 to
                          `v1` when given, else "0"

plus the model's `enableLoRA`, `enableTool`, `toolCallParser`, LMCache's
`--kv-transfer-config` and its `env` list. The image is `repository:tag`; a tagged vLLM image
names the release (`docker run --entrypoint vllm IMAGE serve ...`). Nothing else is read
(resources, storage, router).
"""

from __future__ import annotations

import json

from ..errors import UsageError

__all__ = ["looks_like_helm_values", "launch_from_helm_values"]

_FLAGS = (("maxModelLen", "--max-model-len"), ("dtype", "--dtype"),
          ("tensorParallelSize", "--tensor-parallel-size"),
          ("pipelineParallelSize", "--pipeline-parallel-size"),
          ("maxNumSeqs", "--max-num-seqs"), ("gpuMemoryUtilization", "--gpu-memory-utilization"),
          ("maxLoras", "--max-loras"), ("revision", "--revision"))
_RAY_ONLY = frozenset({"pipelineParallelSize", "revision"})


def looks_like_helm_values(doc) -> bool:
    """A loaded YAML document with the chart's `servingEngineSpec` mapping."""
    return isinstance(doc, dict) and isinstance(doc.get("servingEngineSpec"), dict)


def launch_from_helm_values(doc: dict) -> tuple[list[str], list[str]]:
    """(the launch's words, notes) of the first enabled model of the chart's values."""
    specs = doc["servingEngineSpec"].get("modelSpec")
    models = [m for m in specs if isinstance(m, dict) and m.get("enabled") is not False] \
        if isinstance(specs, list) else []
    if not models:
        raise UsageError("the Helm values list no model under servingEngineSpec.modelSpec",
                         where="command line",
                         fix="Add the model (modelURL, repository, tag, vllmConfig), or paste "
                             "the vllm serve line.")
    m = models[0]
    url = m.get("modelURL")
    if not url:
        raise UsageError(f"the Helm values' model {m.get('name', '?')!r} has no modelURL",
                         where="command line", fix="Set modelSpec[].modelURL to the model.")
    ray = "raySpec" in m
    env = _env(m, ray)
    args = ["serve", str(url), *_model_flags(m, ray), *_config_flags(m.get("vllmConfig"), ray)]
    if ray:
        args += ["--distributed-executor-backend", "ray"]
    image = f"{m.get('repository') or ''}:{m.get('tag') or ''}"
    notes = [f"read from the Helm values' model {m.get('name', '?')!r} (vLLM production-stack "
             f"chart, {'a RayCluster' if ray else 'a Deployment'})"]
    if len(models) > 1:
        others = ", ".join(repr(x.get("name", "?")) for x in models[1:])
        notes.append(f"the values list {len(models)} models; the first is planned (not "
                     f"{others}): put the one to plan first")
    from .vllm_launch import image_version
    if image_version(image):
        return ["docker", "run", *(w for e in env for w in ("-e", e)), "--entrypoint", "vllm",
                image, *args], notes
    return [*env, "vllm", *args], notes


def _model_flags(m: dict, ray: bool) -> list[str]:
    out = ["--enable-lora"] if m.get("enableLoRA") else []
    if m.get("enableTool"):
        out.append("--enable-auto-tool-choice")
    if m.get("toolCallParser"):
        out += ["--tool-call-parser", str(m["toolCallParser"])]
    lm = m.get("lmcacheConfig")
    if isinstance(lm, dict) and lm.get("enabled"):
        # NOTE: the templates' connector: the Deployment's is LMCache's V1 connector unless
        # `v0: "1"`; the Ray script's is the V0 one unless `v1: "1"`.
        cfg = m.get("vllmConfig") if isinstance(m.get("vllmConfig"), dict) else {}
        v1 = str(cfg.get("v1")) == "1" if ray else str(cfg.get("v0")) != "1"
        connector = "LMCacheConnectorV1" if v1 else "LMCacheConnector"
        out += ["--kv-transfer-config",
                json.dumps({"kv_connector": connector, "kv_role": lm.get("kvRole", "kv_both")})]
    return out


def _config_flags(cfg, ray: bool) -> list[str]:
    """`vllmConfig` as the chart's templates write it (the Deployment's, or the Ray script's)."""
    if not isinstance(cfg, dict):
        return []
    out = []
    if "enableChunkedPrefill" in cfg:
        out.append("--enable-chunked-prefill" if cfg["enableChunkedPrefill"]
                   else "--no-enable-chunked-prefill")
    if cfg.get("enablePrefixCaching"):
        out.append("--enable-prefix-caching")
    elif not ray:
        out.append("--no-enable-prefix-caching")
    for key, flag in _FLAGS:
        if key not in cfg or (key in _RAY_ONLY and not ray) or (key == "revision"
                                                                and not cfg[key]):
            continue
        out += [flag, _text(cfg[key])]
    extra = cfg.get("extraArgs")
    out += [_text(a) for a in extra] if isinstance(extra, list) else []
    return out


def _env(m: dict, ray: bool) -> list[str]:
    """`VAR=value` words: the engine switch the templates set, then the model's `env`."""
    cfg = m.get("vllmConfig") if isinstance(m.get("vllmConfig"), dict) else None
    out = []
    if cfg is not None and ray:
        out.append(f"VLLM_USE_V1={_text(cfg['v1']) if 'v1' in cfg else '0'}")
    elif cfg is not None and str(cfg.get("v0")) == "1":
        out.append("VLLM_USE_V1=0")
    for item in m.get("env") or []:
        if isinstance(item, dict) and "name" in item and "value" in item:
            out.append(f"{item['name']}={_text(item['value'])}")
    return out


def _text(value) -> str:
    """A value as Helm's `quote` writes it (booleans lower-case, no `None`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
