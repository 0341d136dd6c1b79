"""A Prometheus exporter of vramguard's view: a custom Collector, fresh values per scrape.

    registry = make_registry(watcher, gpu_reader)       # gpu_reader: fresh NVML per scrape
    server, port = serve(registry, "127.0.0.1", 9400)

Series (labels in braces):
- `vramguard_up`, `vramguard_sample_age_seconds`, `vramguard_sampler_missed_ticks_total`,
  `vramguard_nvml_up`
- `vramguard_gpu_memory_{total,used,free}_bytes{gpu,uuid,name}`,
  `vramguard_gpu_utilization_percent{...}`, `vramguard_gpu_process_memory_bytes{gpu,pid,process}`
- `vramguard_endpoint_up{url}`, `vramguard_endpoint_scrape_duration_seconds{url}`
- per engine `{url,engine,model_name}`: `vramguard_kv_cache_usage_ratio`,
  `vramguard_requests_running`, `vramguard_requests_waiting`, `vramguard_preemptions_total`,
  `vramguard_kv_pool_live_tokens`, `vramguard_kv_pool_planned_tokens`,
  `vramguard_kv_headroom_tokens` ((1 - usage) x live pool)
- `vramguard_alert_firing{rule,severity,subject}` = 1 per firing alert;
  `vramguard_alerts_firing{rule}` = count, present for every rule (0 when clear).

The only module besides monitor/metrics.py that imports prometheus_client.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from typing import Callable, Iterator, Sequence

from ..core.gpu import GpuState
from ..errors import MonitorError, UsageError
from .rules import RULES
from .sampler import gpu_to_dict


def _gpu_families(gpus: Sequence[GpuState]) -> list:
    from prometheus_client.core import GaugeMetricFamily
    labels = ["gpu", "uuid", "name"]
    total = GaugeMetricFamily("vramguard_gpu_memory_total_bytes", "GPU memory as CUDA reports it",
                              labels=labels)
    used = GaugeMetricFamily("vramguard_gpu_memory_used_bytes", "GPU memory in use", labels=labels)
    free = GaugeMetricFamily("vramguard_gpu_memory_free_bytes", "GPU memory free", labels=labels)
    util = GaugeMetricFamily("vramguard_gpu_utilization_percent", "GPU utilization",
                             labels=labels)
    procs = GaugeMetricFamily("vramguard_gpu_process_memory_bytes",
                              "GPU memory per process", labels=["gpu", "pid", "process"])
    for gpu in gpus:
        d = gpu_to_dict(gpu)
        key = [str(d["index"]), d["uuid"] or "", d["name"] or ""]
        total.add_metric(key, d["total_bytes"])
        used.add_metric(key, d["used_bytes"])
        free.add_metric(key, d["free_bytes"])
        if d["utilization_pct"] is not None:
            util.add_metric(key, d["utilization_pct"])
        for p in gpu.processes:
            if p.used_bytes is not None:
                procs.add_metric([str(gpu.index), str(p.pid), p.name or ""], p.used_bytes)
    return [total, used, free, util, procs]


def _engine_families(sample, planned_for: Callable[[str], int | None]) -> list:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    labels = ["url", "engine", "model_name"]
    up = GaugeMetricFamily("vramguard_endpoint_up", "1 when the last scrape succeeded",
                           labels=["url"])
    took = GaugeMetricFamily("vramguard_endpoint_scrape_duration_seconds",
                             "time to fetch and parse /metrics", labels=["url"])
    kv = GaugeMetricFamily("vramguard_kv_cache_usage_ratio", "vLLM KV-cache usage 0-1",
                           labels=labels)
    running = GaugeMetricFamily("vramguard_requests_running", "requests running", labels=labels)
    waiting = GaugeMetricFamily("vramguard_requests_waiting", "requests waiting", labels=labels)
    preempt = CounterMetricFamily("vramguard_preemptions", "vLLM preemptions (vLLM's counter)",
                                  labels=labels)
    live = GaugeMetricFamily("vramguard_kv_pool_live_tokens",
                             "live KV pool: num_gpu_blocks x block_size", labels=labels)
    planned = GaugeMetricFamily("vramguard_kv_pool_planned_tokens",
                                "KV pool vramguard planned for the same settings", labels=labels)
    headroom = GaugeMetricFamily("vramguard_kv_headroom_tokens",
                                 "free KV tokens: (1 - usage) x live pool", labels=labels)
    for ep in sample.endpoints if sample else ():
        up.add_metric([ep.url], 1.0 if ep.ok else 0.0)
        if ep.latency_s is not None:
            took.add_metric([ep.url], ep.latency_s)
        for e in ep.engines:
            key = [ep.url, e.engine, e.model_name or ""]
            _add(kv, key, e.kv_cache_usage)
            _add(running, key, e.num_requests_running)
            _add(waiting, key, e.num_requests_waiting)
            _add(preempt, key, e.num_preemptions_total)
            _add(live, key, e.kv_pool_tokens)
            _add(planned, key, planned_for(ep.url))
            if e.kv_pool_tokens is not None and e.kv_cache_usage is not None:
                headroom.add_metric(key, (1.0 - e.kv_cache_usage) * e.kv_pool_tokens)
    return [up, took, kv, running, waiting, preempt, live, planned, headroom]


def _add(family, key, value) -> None:
    if value is not None:
        family.add_metric(key, float(value))


def _alert_families(alerts) -> list:
    from prometheus_client.core import GaugeMetricFamily
    one = GaugeMetricFamily("vramguard_alert_firing", "1 for each firing vramguard alert",
                            labels=["rule", "severity", "subject"])
    count = GaugeMetricFamily("vramguard_alerts_firing", "firing alerts per rule",
                              labels=["rule"])
    per_rule = dict.fromkeys(RULES, 0)
    for a in alerts:
        one.add_metric([a.rule, a.severity, a.subject], 1.0)
        per_rule[a.rule] = per_rule.get(a.rule, 0) + 1
    for rule, n in per_rule.items():
        count.add_metric([rule], n)
    return [one, count]


class VramguardCollector:
    """Builds every family at scrape time from the watcher's latest tick (+ fresh GPUs)."""

    def __init__(self, watcher, gpu_reader: Callable[[], Sequence[GpuState]] | None = None,
                 clock: Callable[[], float] = time.time):
        self.watcher = watcher
        self.gpu_reader = gpu_reader
        self.clock = clock

    def _gpus(self, sample) -> tuple[tuple[GpuState, ...], bool]:
        if self.gpu_reader is not None:
            try:
                return tuple(self.gpu_reader()), True
            except Exception:   # NOTE: fall back to the sampler's last reading
                pass
        if sample is None:
            return (), False
        return sample.gpus, sample.gpu_error is None

    def collect(self) -> Iterator:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        sample, alerts = self.watcher.latest
        yield GaugeMetricFamily("vramguard_up", "1 while the exporter runs", value=1.0)
        age = GaugeMetricFamily("vramguard_sample_age_seconds", "age of the last sample")
        if sample is not None:
            age.add_metric([], max(0.0, self.clock() - sample.ts))
        yield age
        yield CounterMetricFamily("vramguard_sampler_missed_ticks",
                                  "ticks skipped because sampling was slower than the interval",
                                  value=getattr(self.watcher, "missed_total", 0))
        gpus, nvml_ok = self._gpus(sample)
        yield GaugeMetricFamily("vramguard_nvml_up", "1 when GPU memory is being read",
                                value=1.0 if nvml_ok else 0.0)
        yield from _gpu_families(gpus)
        yield from _engine_families(sample, self.watcher.planned_for)
        yield from _alert_families(alerts)


def make_registry(watcher, gpu_reader=None):
    """A fresh CollectorRegistry holding only the vramguard collector."""
    from prometheus_client import CollectorRegistry
    registry = CollectorRegistry(auto_describe=False)
    registry.register(VramguardCollector(watcher, gpu_reader))
    return registry


def exposition(registry) -> bytes:
    """The text a scrape returns (used by tests and the scrape benchmark)."""
    from prometheus_client import generate_latest
    return generate_latest(registry)


def parse_listen(text: str, *, allow_remote: bool = False) -> tuple[str, int]:
    """'127.0.0.1:9400' / '[::1]:9400' / 'localhost:9400' -> (host, port).

    Refuses non-loopback addresses (0.0.0.0, ::, a LAN IP) unless `allow_remote`.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "127.0.0.1", text
    host = host.strip("[]") or "0.0.0.0"
    try:
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ValueError
    except ValueError:
        raise UsageError(f"cannot read {text!r}", where="--listen",
                         fix="Write HOST:PORT, e.g. 127.0.0.1:9400.") from None
    if not _valid_host(host):
        raise UsageError(f"{host!r} is not a host name or IP address", where="--listen",
                         fix="Write HOST:PORT, e.g. 127.0.0.1:9400 or [::1]:9400.")
    if not allow_remote and not _is_loopback(host):
        raise UsageError(f"{host} is reachable from other machines", where="--listen",
                         fix="The exporter shows process names and GPU details: keep it on "
                             "127.0.0.1, or pass --allow-remote deliberately.")
    return host, port


_HOST_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def _valid_host(host: str) -> bool:
    """An IP address, or a DNS name of ASCII labels (what getaddrinfo can look up)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    return 0 < len(host) <= 253 and all(_HOST_LABEL.fullmatch(p) for p in host.split("."))


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def serve(registry, host: str, port: int):
    """Start the HTTP server in a daemon thread; returns (server, bound port)."""
    from prometheus_client import start_http_server
    try:
        result = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise MonitorError(f"cannot listen on {host}:{port} ({exc.strerror or exc})",
                           where="--listen", fix="Pick a free port.") from None
    server = result[0] if isinstance(result, tuple) else None
    bound = server.server_address[1] if server is not None else port
    return server, bound
