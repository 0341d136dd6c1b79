"""deploy/prometheus and deploy/grafana only use series the exporter really emits."""

import json
import re
from dataclasses import replace

import yaml

from monitor_helpers import ROOT, engine, gpu, sample
from vramguard.monitor.exporter import exposition, make_registry
from vramguard.monitor.rules import RULES, Alert
from vramguard.monitor.watcher import Watcher

NAME = re.compile(r"\bvramguard_[a-z_]+")


def _emitted() -> set[str]:
    w = Watcher(planned_kv_tokens=100)
    s = sample(0, [engine(kv=0.5, running=1, waiting=0, preempt=0, blocks=10)],
               gpus=[gpu(0, processes=[(1, "vllm", 1.0)])])
    w.on_sample(replace(s, endpoints=tuple(replace(e, latency_s=0.01) for e in s.endpoints)))
    w.latest = (w.latest[0], [Alert("foreign_process", "warning", "m", "GPU 0")])
    text = exposition(make_registry(w)).decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines()
            if line and not line.startswith("#")}


def test_alert_rules_use_emitted_series_and_known_rules():
    emitted = _emitted()
    doc = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())
    for rule in doc["groups"][0]["rules"]:
        for name in NAME.findall(rule["expr"]):
            assert name in emitted, (rule["alert"], name)
        assert rule["labels"]["rule"] in RULES + ("exporter_down",)
        assert "--" in rule["annotations"]["description"] or "exporter" in rule["alert"].lower() \
            or "diagnose" in rule["annotations"]["description"]


def test_every_rule_has_a_prometheus_alert():
    doc = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())
    assert {r["labels"]["rule"] for r in doc["groups"][0]["rules"]} >= set(RULES)


def test_grafana_dashboard_queries_emitted_series():
    emitted = _emitted()
    dash = json.loads((ROOT / "deploy/grafana/vramguard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        for name in NAME.findall(expr):
            assert name in emitted, name
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
