"""vLLM's Prometheus `/metrics`: fetch, parse, and turn into per-engine numbers.

The only module (with `monitor/exporter.py`) that imports prometheus_client.

- `fetch_text(url, timeout_s)` -> the body (raises MonitorError: down, timeout, HTTP error).
- `parse_metrics(text)` -> tuple[EngineMetrics, ...], one per `engine` label (v1 data-parallel
  ranks each have their own engine index; v0 scrapes have no engine label and become "0").
  Raises MonitorError when the text is not Prometheus exposition or has no `vllm:` series.
- `scrape(url, timeout_s)` -> EndpointScrape; NEVER raises: failures are `ok=False, error=...`.

Version differences handled (reference §12):
- KV usage: `vllm:kv_cache_usage_perc` (0.9.2+) is preferred over `vllm:gpu_cache_usage_perc`
  (0.4.0-0.11.x; deprecated 0.9.2, gone 0.12).
- Counters are matched by their scraped sample names (`vllm:num_preemptions_total`), so typed
  (family name without `_total`) and untyped exposition both work.
- `vllm:cache_config_info` labels are kept as strings; v0 has no engine label on it, in which
  case it applies to every engine of the scrape.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from ..errors import MonitorError

KV_USAGE_NEW = "vllm:kv_cache_usage_perc"
KV_USAGE_OLD = "vllm:gpu_cache_usage_perc"

# scraped sample name -> EngineMetrics field
_GAUGES = {
    "vllm:num_requests_running": "num_requests_running",
    "vllm:num_requests_waiting": "num_requests_waiting",
    "vllm:num_requests_swapped": "num_requests_swapped",
}
_COUNTERS = {
    "vllm:num_preemptions_total": "num_preemptions_total",
    "vllm:prompt_tokens_total": "prompt_tokens_total",
    "vllm:generation_tokens_total": "generation_tokens_total",
}
_WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"
_CACHE_CONFIG = "vllm:cache_config_info"
_WANTED = tuple(_GAUGES) + tuple(_COUNTERS) + (
    KV_USAGE_NEW, KV_USAGE_OLD, _WAITING_BY_REASON, _CACHE_CONFIG)
MAX_BODY_BYTES = 16 << 20


@dataclass(frozen=True)
class EngineMetrics:
    """One vLLM engine (a data-parallel rank, or the only engine) as one scrape saw it.

    Counts are ints, `kv_cache_usage` a fraction 0-1, None = not exported by this version.
    `cache_config` holds the `vllm:cache_config_info` labels verbatim (strings).
    """

    engine: str = "0"
    model_name: str | None = None
    kv_cache_usage: float | None = None
    kv_usage_metric: str | None = None      # which gauge it came from
    num_requests_running: int | None = None
    num_requests_waiting: int | None = None
    num_requests_swapped: int | None = None
    waiting_by_reason: dict[str, int] = field(default_factory=dict)
    num_preemptions_total: int | None = None
    prompt_tokens_total: int | None = None
    generation_tokens_total: int | None = None
    cache_config: dict[str, str] = field(default_factory=dict)

    def _int_label(self, key: str) -> int | None:
        return _to_int(self.cache_config.get(key))

    @property
    def num_gpu_blocks(self) -> int | None:
        return self._int_label("num_gpu_blocks")

    @property
    def block_size(self) -> int | None:
        return self._int_label("block_size")

    @property
    def kv_cache_memory_bytes(self) -> int | None:
        return self._int_label("kv_cache_memory_bytes")

    @property
    def kv_cache_size_tokens(self) -> int | None:
        """As vLLM reports it (0.24+); else None."""
        return self._int_label("kv_cache_size_tokens")

    @property
    def kv_cache_max_concurrency(self) -> float | None:
        return _to_float(self.cache_config.get("kv_cache_max_concurrency"))

    @property
    def gpu_memory_utilization(self) -> float | None:
        return _to_float(self.cache_config.get("gpu_memory_utilization"))

    @property
    def cache_dtype(self) -> str | None:
        value = self.cache_config.get("cache_dtype")
        return None if value in (None, "None") else value

    @property
    def kv_pool_tokens(self) -> int | None:
        """The live KV pool in tokens: num_gpu_blocks x block_size (None if unknown)."""
        blocks, size = self.num_gpu_blocks, self.block_size
        return blocks * size if blocks is not None and size is not None else None

    def to_dict(self) -> dict:
        return {
            "engine": self.engine, "model_name": self.model_name,
            "kv_cache_usage": self.kv_cache_usage, "kv_usage_metric": self.kv_usage_metric,
            "num_requests_running": self.num_requests_running,
            "num_requests_waiting": self.num_requests_waiting,
            "num_requests_swapped": self.num_requests_swapped,
            "num_requests_waiting_by_reason": dict(self.waiting_by_reason),
            "num_preemptions_total": self.num_preemptions_total,
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
            "num_gpu_blocks": self.num_gpu_blocks, "block_size": self.block_size,
            "kv_pool_tokens": self.kv_pool_tokens,
            "kv_cache_size_tokens": self.kv_cache_size_tokens,
            "kv_cache_memory_bytes": self.kv_cache_memory_bytes,
            "kv_cache_max_concurrency": self.kv_cache_max_concurrency,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "cache_dtype": self.cache_dtype,
        }


@dataclass(frozen=True)
class EndpointScrape:
    """One scrape of one endpoint. `ok=False` carries `error` (down, timeout, garbage).

    Endpoint-level numbers aggregate the engines: counts and counters are summed, KV usage
    is the maximum (the most pressured engine decides), the pool is summed.
    `notes` carries events seen by the sampler, such as a counter reset (a restart).
    """

    url: str
    ok: bool
    engines: tuple[EngineMetrics, ...] = ()
    error: str | None = None
    latency_s: float | None = None
    notes: tuple[str, ...] = ()

    def _sum(self, name: str) -> int | None:
        values = [getattr(e, name) for e in self.engines if getattr(e, name) is not None]
        return sum(values) if values else None

    @property
    def kv_cache_usage(self) -> float | None:
        values = [e.kv_cache_usage for e in self.engines if e.kv_cache_usage is not None]
        return max(values) if values else None

    @property
    def model_name(self) -> str | None:
        names = sorted({e.model_name for e in self.engines if e.model_name})
        return ",".join(names) if names else None

    def to_dict(self) -> dict:
        reasons: dict[str, int] = {}
        for e in self.engines:
            for reason, n in e.waiting_by_reason.items():
                reasons[reason] = reasons.get(reason, 0) + n
        return {
            "url": self.url, "ok": self.ok, "error": self.error,
            "latency_s": None if self.latency_s is None else round(self.latency_s, 6),
            "model_name": self.model_name,
            "kv_cache_usage": self.kv_cache_usage,
            "num_preemptions_total": self._sum("num_preemptions_total"),
            "num_requests_running": self._sum("num_requests_running"),
            "num_requests_waiting": self._sum("num_requests_waiting"),
            "num_requests_swapped": self._sum("num_requests_swapped"),
            "num_requests_waiting_by_reason": reasons,
            "prompt_tokens_total": self._sum("prompt_tokens_total"),
            "generation_tokens_total": self._sum("generation_tokens_total"),
            "kv_pool_tokens": self._sum("kv_pool_tokens"),
            "notes": list(self.notes),
            "engines": [e.to_dict() for e in self.engines],
        }


def metrics_url(url: str) -> str:
    """`http://host:8000` -> `http://host:8000/metrics`; a URL with a path is kept."""
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    if parts.path in ("", "/"):
        parts = parts._replace(path="/metrics")
    return urllib.parse.urlunsplit(parts)


def fetch_text(url: str, timeout_s: float = 2.0) -> str:
    """GET the metrics body. Raises MonitorError (connection, timeout, HTTP status, size)."""
    target = metrics_url(url)
    request = urllib.request.Request(target, headers={"Accept": "text/plain"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read(MAX_BODY_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise MonitorError(f"HTTP {exc.code} {exc.reason}", where=target,
                           fix="Is this vLLM's /metrics? Check the server log.") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            raise MonitorError(f"no answer within {timeout_s:g} s", where=target,
                               fix="The server is overloaded or hung; raise --timeout.") from None
        raise MonitorError(f"cannot connect ({reason})", where=target,
                           fix="Is vLLM running and listening there?") from None
    if len(body) > MAX_BODY_BYTES:
        raise MonitorError("response larger than 16 MiB", where=target,
                           fix="Point --url at vLLM's /metrics.")
    return body.decode("utf-8", errors="replace")


def _wanted_lines(text: str) -> str:
    """Only the series we use (+ their TYPE/HELP lines).

    NOTE: prometheus_client's parser costs ~10 ms on a 50 KB vLLM scrape, mostly histograms
    we never read; filtering lines first makes it ~1 ms (the sampler's 1 % CPU budget).
    """
    keep = []
    for line in text.splitlines():
        if line.startswith(_WANTED):
            keep.append(line)
        elif line.startswith("# "):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[2].startswith(_WANTED):
                keep.append(line)
    return "\n".join(keep) + "\n"


def _looks_like_exposition(text: str) -> bool:
    head = text.lstrip()[:512].lower()
    return not (head.startswith("<") or head.startswith("{") or "<html" in head)


def parse_metrics(text: str) -> tuple[EngineMetrics, ...]:
    """Parse a vLLM /metrics body into one EngineMetrics per engine (sorted by engine).

    Raises MonitorError when the body is not Prometheus text or carries no vLLM series.
    """
    from prometheus_client.parser import text_string_to_metric_families

    if not _looks_like_exposition(text):
        raise MonitorError("response is not Prometheus text (HTML or JSON?)",
                           fix="Point --url at vLLM's OpenAI server (it serves /metrics).")
    values: dict[str, dict] = {}
    configs: list[dict[str, str]] = []
    try:
        for family in text_string_to_metric_families(_wanted_lines(text)):
            for s in family.samples:
                _collect(values, configs, s.name, s.labels, s.value)
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise MonitorError(f"unparsable metrics text ({exc})",
                           fix="Point --url at vLLM's /metrics.") from None
    if not values and not configs:
        raise MonitorError("no vllm: series in the response",
                           fix="Is this a vLLM server? Metrics need `vllm serve` (not --disable-log-stats).")
    return _build_engines(values, configs)


def _collect(values: dict, configs: list, name: str, labels: dict, value: float) -> None:
    if name == _CACHE_CONFIG:
        configs.append(dict(labels))
        return
    engine = labels.get("engine", "0")
    slot = values.setdefault(engine, {"waiting_by_reason": {}})
    if labels.get("model_name") and "model_name" not in slot:
        slot["model_name"] = labels["model_name"]
    if name in _GAUGES:
        slot[_GAUGES[name]] = _count(value)
    elif name in _COUNTERS:
        slot[_COUNTERS[name]] = _count(value)
    elif name == _WAITING_BY_REASON:
        slot["waiting_by_reason"][labels.get("reason", "unknown")] = _count(value)
    elif name == KV_USAGE_NEW:
        slot["kv_cache_usage"], slot["kv_usage_metric"] = float(value), KV_USAGE_NEW
    elif name == KV_USAGE_OLD and slot.get("kv_usage_metric") != KV_USAGE_NEW:
        slot["kv_cache_usage"], slot["kv_usage_metric"] = float(value), KV_USAGE_OLD


def _build_engines(values: dict, configs: list) -> tuple[EngineMetrics, ...]:
    by_engine = {c.get("engine"): c for c in configs}
    shared = by_engine.get(None)                      # v0: no engine label on the info gauge
    engines = set(values) | {e for e in by_engine if e is not None}
    out = []
    for engine in sorted(engines, key=_engine_key):
        slot = values.get(engine, {"waiting_by_reason": {}})
        config = by_engine.get(engine) or shared or {}
        config = {k: v for k, v in config.items() if k != "engine"}
        out.append(EngineMetrics(engine=engine, cache_config=config, **slot))
    return tuple(out)


def _engine_key(engine: str):
    return (0, int(engine), "") if engine.isdigit() else (1, 0, engine)


def scrape(url: str, timeout_s: float = 2.0) -> EndpointScrape:
    """Fetch and parse one endpoint. Never raises: errors come back as `ok=False`."""
    start = time.perf_counter()
    try:
        engines = parse_metrics(fetch_text(url, timeout_s))
    except MonitorError as exc:
        return EndpointScrape(url=url, ok=False, error=exc.line(),
                              latency_s=time.perf_counter() - start)
    except Exception as exc:  # NOTE: the sampler must survive anything a server sends
        return EndpointScrape(url=url, ok=False, error=f"{type(exc).__name__}: {exc}",
                              latency_s=time.perf_counter() - start)
    return EndpointScrape(url=url, ok=True, engines=engines,
                          latency_s=time.perf_counter() - start)


def _count(value: float) -> int | None:
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return int(round(value))


def _to_int(text: str | None) -> int | None:
    if text in (None, "", "None"):
        return None
    try:
        return int(float(text))
    except ValueError:
        return None


def _to_float(text: str | None) -> float | None:
    if text in (None, "", "None"):
        return None
    try:
        return float(text)
    except ValueError:
        return None
