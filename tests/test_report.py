"""`vramguard report`: synthetic history -> summary numbers, HTML, PNG; Chromium renders it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pngcheck  # noqa: E402
import report_history as rh  # noqa: E402

from vramguard.cli import main  # noqa: E402
from vramguard.errors import MonitorError  # noqa: E402
from vramguard.monitor.history import History  # noqa: E402
from vramguard.monitor.report_data import build_report  # noqa: E402
from vramguard.render.report_html import fmt_duration, render_html  # noqa: E402


@pytest.fixture(scope="module")
def history_path(tmp_path_factory) -> Path:
    return rh.write_history(tmp_path_factory.mktemp("hist") / "history.sqlite3")


@pytest.fixture(scope="module")
def data(history_path):
    with History(history_path, readonly=True) as h:
        return build_report(h)


def test_summary_numbers(data):
    s = data.summary
    assert s.ticks == rh.N - len(rh.GAP)
    assert s.gaps == 1
    assert s.peak_kv_usage == 1.0
    assert rh.T0 + 150 <= s.peak_kv_ts < rh.T0 + 280
    assert s.total_preemptions == rh.preemptions_a(rh.N)          # 33
    # KV >= 90 % from t=144 (the ramp) through t=290 (the drain); each sample holds 1 s
    assert s.time_above_threshold_s == pytest.approx(147, abs=1)
    assert s.peak_waiting == 40
    (g0, used0, total0), (g1, _, _) = s.peak_gpu_used
    assert g0.startswith("GPU 0") and total0 == rh.H100.total_bytes
    assert used0 > 78 * rh.GIB                                        # the foreign process
    assert s.endpoints == ("127.0.0.1:8000", "127.0.0.1:8001")


def test_alerts_recorded_and_marked(data):
    rules = {a.rule for a in data.alerts}
    assert {"kv_usage_high", "preemptions_rising", "foreign_process"} <= rules
    assert data.summary.alerts_by_severity.get("critical", 0) >= 1


def test_charts_break_over_the_gap_and_rates_do_not_spike(data):
    charts = {c.key: c for c in data.charts}
    assert set(charts) == {"gpu_memory", "kv_usage", "requests", "preemptions", "throughput"}
    kv = charts["kv_usage"].lines[0].values
    assert None in kv                                     # the 10 missed ticks
    gen = [v for v in charts["throughput"].lines[0].values if v is not None]
    assert max(gen) == pytest.approx(1400, rel=0.01)      # no spike after the gap
    assert min(gen) == pytest.approx(900, rel=0.01)
    pre = [v for v in charts["preemptions"].lines[0].values if v]
    assert pre and max(pre) <= 60


def test_window_is_relative_and_bounded(history_path):
    with History(history_path, readonly=True) as h:
        last = h.span()[1]
        part = build_report(h, last - 120, last)
        assert part.summary.ticks == 121
        assert part.summary.total_preemptions == 0
        with pytest.raises(MonitorError):
            build_report(h, last + 10, last + 20)


def test_empty_history_is_an_error(tmp_path):
    History(tmp_path / "empty.sqlite3").close()
    with History(tmp_path / "empty.sqlite3", readonly=True) as h, pytest.raises(MonitorError):
        build_report(h)


def test_html_is_self_contained(data):
    page = render_html(data)
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 5
    for banned in ("<script", "src=", "href=", "@import", "url(", "<link"):
        assert banned not in page, banned
    assert "Peak KV usage" in page and "100%" in page
    assert fmt_duration(147) in page                         # time above 90 %
    assert "kv_usage_high" in page and "foreign_process" in page


def test_fmt_duration():
    assert fmt_duration(0) == "0s"
    assert fmt_duration(0.25) == "250ms"
    assert fmt_duration(4.25) == "4.2s"
    assert fmt_duration(75) == "1m 15s"
    assert fmt_duration(3725) == "1h 2m"
    assert fmt_duration(90061) == "1d 1h"


def test_cli_writes_html_png_and_summary(history_path, tmp_path, capsys):
    html, png = tmp_path / "r.html", tmp_path / "r.png"
    rc = main(["report", "--db", str(history_path), "--since", "1h", "--html", str(html),
               "--png", str(png), "--title", "demo"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "peak KV usage      100%" in out and "preemptions        33" in out
    assert html.read_text().count("<svg") == 5
    pixels = pngcheck.decode(png)
    assert pixels.shape[1] > 800 and pixels.std() > 5


def test_cli_json_and_errors(history_path, tmp_path, capsys):
    import json
    assert main(["report", "--db", str(history_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["total_preemptions"] == 33
    assert main(["report", "--db", str(tmp_path / "missing.sqlite3")]) == 2
    assert "no history recorded yet" in capsys.readouterr().err
    assert main(["report", "--db", str(history_path), "--since", "5m", "--until", "10m"]) == 2


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.integration
def test_chromium_renders_the_page(data, tmp_path):
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing (scripts/setup-test-env installs it)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    page = tmp_path / "report.html"
    page.write_text(render_html(data), encoding="utf-8")
    shot = tmp_path / "shot.png"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
           f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.is_file(), proc.stderr[-2000:]
    assert shot.stat().st_size > 30_000
    pixels = pngcheck.decode(shot)
    assert pixels.shape[:2] == (1600, 1200)
    rgb = pixels[..., :3].reshape(-1, 3)
    assert rgb.std() > 10                                   # not blank
    # the chart colours are on screen: the blue of series 0 and the red 90 % rule's family
    blue = ((rgb[:, 2] > 200) & (rgb[:, 0] < 80)).sum()
    assert blue > 2_000
    distinct = len({tuple(p) for p in rgb[:: 97]})
    assert distinct > 50


def test_png_without_matplotlib_is_a_usage_error(data, monkeypatch):
    from vramguard.errors import UsageError
    from vramguard.render.report_png import render_png

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(UsageError, match="matplotlib"):
        render_png(data)


def test_report_does_not_import_matplotlib_for_html(history_path, tmp_path):
    code = ("import sys; from vramguard.cli import main; "
            f"rc = main(['report', '--db', {str(history_path)!r}, '--html', "
            f"{str(tmp_path / 'r.html')!r}]); "
            "assert rc == 0; assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_single_sample_and_gpu_only_history(tmp_path):
    path = tmp_path / "one.sqlite3"
    with History(path) as h:
        s = rh.sample(0)
        h.write(type(s)(ts=s.ts, tick=0, gpus=s.gpus, endpoints=()))
    with History(path, readonly=True) as h:
        data = build_report(h)
    assert data.summary.ticks == 1 and data.summary.peak_kv_usage is None
    page = render_html(data)
    assert page.count("<svg") == 1                      # GPU memory only
    assert "no vLLM endpoint samples" in page
    from vramguard.render.report_png import render_png
    assert render_png(data)[:8] == b"\x89PNG\r\n\x1a\n"
