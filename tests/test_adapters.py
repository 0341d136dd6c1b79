"""One adapter module per outside library: each third-party import lives where DEVELOPING.md
says, so its errors are translated into our exception family in one place."""

import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "vramguard"

OWNERS = {
    "yaml": {"sources/vllm_args.py"},
    "pynvml": {"probe/nvml.py"},
    "gguf": {"sources/gguf.py"},
    "huggingface_hub": {"sources/hub.py"},
    # exposition format: written by the exporter, read by the metrics scraper
    "prometheus_client": {"monitor/exporter.py", "monitor/metrics.py"},
    "matplotlib": {"render/chart.py", "render/report_png.py"},
    "psutil": {"probe/host.py", "probe/nvml.py"},
}
FORBIDDEN = ("torch", "numpy", "safetensors", "transformers", "pickle")


def _imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    pat = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_][\w]*)", re.M)
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        for name in pat.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, set()).add(rel)
    return found


def test_each_outside_library_is_imported_by_its_adapter_only():
    found = _imports()
    for lib, owners in OWNERS.items():
        assert found.get(lib, set()) <= owners, f"{lib} imported outside {owners}: {found[lib]}"
        assert found.get(lib), f"{lib}: no adapter imports it any more; update OWNERS"


def test_no_heavy_or_unsafe_library_is_imported():
    found = _imports()
    for lib in FORBIDDEN:
        assert lib not in found, f"{lib} imported in {found.get(lib)}"
