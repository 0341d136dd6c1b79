"""Watching a running vLLM: /metrics, GPU samples, history, rules, exporter.

- `metrics`   fetch + parse vLLM /metrics -> EndpointScrape / EngineMetrics (never raises in `scrape`)
- `sampler`   Sampler: one Sample per tick (GPUs via probe.nvml + endpoints), fixed grid, gap markers
- `rules`     pure alert rules over a window of Samples: `evaluate(window) -> [Alert]`
- `history`   SQLite history (one transaction per tick) and its query API for `report`
- `watcher`   window + rules + plan link + history, shared by `watch` and `exporter`
- `planlink`  the planned KV pool for the live settings (core.planner)
- `exporter`  Prometheus collector and HTTP server
- `stress`, `report_data`: `vramguard stress` and `vramguard report`
"""
