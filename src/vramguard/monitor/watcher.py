"""Glue shared by `watch` and `exporter`: a rolling window, rules, plan link and history.

    watcher = Watcher(config=RuleConfig(), history=History(path), planned_kv_tokens=None,
                      plan_request=PlanRequest(model="meta-llama/Llama-3.1-8B", gpu="H100"))
    sampler.run(watcher.on_sample)          # each tick: window -> rules -> history
    watcher.latest                          # (Sample, alerts) of the last tick, atomically

`snapshot()` is the `--once --json` document.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from ..errors import MonitorError
from .history import History
from .rules import Alert, RuleConfig, evaluate, preemption_rate_per_min, trim
from .sampler import Sample


@dataclass(frozen=True)
class PlanRequest:
    """Plan the live settings of each endpoint for this model on this GPU (see planlink)."""

    model: str
    gpu: str | None = None
    vllm_version: str | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    offline: bool = False


class Watcher:
    """Consumes samples: keeps the window, evaluates the rules, records history."""

    def __init__(self, *, config: RuleConfig = RuleConfig(), history: History | None = None,
                 planned_kv_tokens: int | None = None, plan_request: PlanRequest | None = None,
                 ignore_pids=()):
        self.config = config
        self.history = history
        self.planned: dict[str, int] = {}
        self.default_planned = planned_kv_tokens
        self.plan_request = plan_request
        self.ignore_pids = tuple(ignore_pids)
        self.notes: list[str] = []
        self.window: deque[Sample] = deque()
        self.latest: tuple[Sample | None, list[Alert]] = (None, [])
        self.missed_total = 0
        self._plan_tried: set[str] = set()
        self._lock = threading.Lock()

    def planned_for(self, url: str) -> int | None:
        return self.planned.get(url, self.default_planned)

    def _resolve_plans(self, sample: Sample) -> None:
        if self.plan_request is None:
            return
        for ep in sample.endpoints:
            if ep.url in self._plan_tried or not ep.ok or not ep.engines:
                continue
            self._plan_tried.add(ep.url)
            from ..errors import VramguardError
            from .planlink import planned_pool
            req = self.plan_request
            gpu_spec = sample.gpus[0].spec if sample.gpus else None
            try:
                pool = planned_pool(req.model, req.gpu, cache_config=ep.engines[0].cache_config,
                                    extra_args=req.extra_args, vllm_version=req.vllm_version,
                                    gpu_spec=gpu_spec, offline=req.offline)
            except VramguardError as exc:
                self.notes.append(f"no plan for {ep.url}: {exc.line()}")
                continue
            if pool.tokens:
                self.planned[ep.url] = pool.tokens
                self.notes.append(f"plan for {ep.url}: {req.model} on {pool.gpu_name}: "
                                  f"{pool.num_blocks:,} blocks x {pool.block_size} = "
                                  f"{pool.tokens:,} tokens")
            else:
                self.notes.append(f"plan for {ep.url} predicts no KV pool: {pool.note}")

    def on_sample(self, sample: Sample) -> list[Alert]:
        """Add a sample; returns the alerts firing now (also written to history)."""
        self._resolve_plans(sample)
        self.missed_total += sample.missed_ticks
        self.window.append(sample)
        while self.window and self.window[0].ts < sample.ts - self.config.window_s:
            self.window.popleft()
        planned = {ep.url: self.planned_for(ep.url) for ep in sample.endpoints
                   if self.planned_for(ep.url)}
        alerts = evaluate(list(self.window), self.config, planned_kv_tokens=planned or None,
                          ignore_pids=self.ignore_pids)
        if self.history is not None:
            try:
                self.history.write(sample, alerts)
            except MonitorError as exc:   # NOTE: a full disk must not stop the live view
                self.notes.append(f"recording stopped: {exc.line()}")
                self.history = None
        with self._lock:
            self.latest = (sample, alerts)
        return alerts

    def rates(self) -> dict[str, float | None]:
        """Preemptions per minute per endpoint over the last minute."""
        window = trim(list(self.window), 60.0)
        latest = self.latest[0]
        if latest is None:
            return {}
        return {ep.url: preemption_rate_per_min(window, ep.url) for ep in latest.endpoints}

    def snapshot(self) -> dict:
        """The `--once --json` document (also one line per tick of `watch --json`)."""
        sample, alerts = self.latest
        doc = sample.to_dict() if sample else {"gpus": [], "endpoints": []}
        rates = self.rates()
        for ep in doc.get("endpoints", []):
            ep["preemptions_per_min"] = rates.get(ep["url"])
            ep["planned_kv_pool_tokens"] = self.planned_for(ep["url"])
        doc["alerts"] = [a.to_dict() for a in alerts]
        doc["notes"] = list(self.notes)
        return doc
