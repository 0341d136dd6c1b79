"""vLLM log parsing, diagnosis and calibration (see docs/diagnose.md).

- `parser.parse(source) -> Extracted` — streaming, bounded memory, never raises on content;
- `diagnose.diagnose(extracted) -> Diagnosis` — phase, failure, cause, fixes;
- `compare.plan_for_log(extracted, gpu=..., model=...)` — vramguard's plan for the same settings;
- `learn.learn(extracted, key) -> Learned` and `store.load_calibration(key) -> Calibration | None`.
"""
