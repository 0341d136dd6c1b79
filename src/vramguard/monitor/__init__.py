"""Watching a running vLLM: /metrics, GPU samples, history, rules, exporter."""
