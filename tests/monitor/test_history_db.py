"""SQLite history: round trip, alerts and events, retention, buckets, crash safety."""

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from monitor_helpers import engine, fake_gpus, sample
from vramguard.errors import MonitorError
from vramguard.monitor.history import History, default_history_path
from vramguard.monitor.metrics import EndpointScrape
from vramguard.monitor.rules import Alert


def _fill(h, n, start=1000.0, step=1.0):
    reader = fake_gpus(2)
    for i in range(n):
        s = sample(start + i * step, [engine(kv=i / n, running=i, waiting=0, preempt=i // 2,
                                             blocks=100)], gpus=reader())
        h.write(s, [])


def test_round_trip_series(tmp_path):
    with History(tmp_path / "h.sqlite3") as h:
        _fill(h, 10)
    r = History(tmp_path / "h.sqlite3", readonly=True)
    rows = list(r.series())
    assert len(rows) == 10 and r.count() == 10 and r.span() == (1000.0, 1009.0)
    row = rows[3]
    assert row.ts == 1003.0 and row.missed_ticks == 0
    assert [g.index for g in row.gpus] == [0, 1]
    assert row.gpus[0].name == "H100-80GB" and row.gpus[0].free_bytes == 10 << 30
    (ep,) = row.endpoints
    assert (ep.url, ep.engine, ep.ok, ep.num_requests_running) == ("http://vllm:8000", "0", True, 3)
    assert ep.kv_cache_usage == 0.3 and ep.num_preemptions_total == 1 and ep.kv_pool_tokens == 1600
    assert [x.ts for x in r.series(1002.5, 1005.0)] == [1003.0, 1004.0, 1005.0]
    assert list(r.series(5000, 6000)) == []
    assert len(list(r.gpu_series(gpu_index=1))) == 10
    assert len(list(r.endpoint_series(url="http://vllm:8000"))) == 10
    assert r.cache_configs()[("http://vllm:8000", "0")]["num_gpu_blocks"] == "100"
    r.close()


def test_failed_scrape_gap_and_reset_notes_are_recorded(tmp_path):
    with History(tmp_path / "h.sqlite3") as h:
        h.write(sample(1, ok=False, error="cannot connect"), [])
        note = EndpointScrape("http://vllm:8000", True, (engine(preempt=0),),
                              notes=("counter reset on engine 0: vLLM restarted?",))
        from vramguard.monitor.sampler import Sample
        h.write(Sample(ts=3.0, tick=2, endpoints=(note,), missed_ticks=1,
                       gpu_error="NVML unavailable"), [])
        rows = list(h.series())
        assert not rows[0].endpoints[0].ok and rows[0].endpoints[0].error == "cannot connect"
        assert rows[1].missed_ticks == 1 and rows[1].gpu_error == "NVML unavailable"
        kinds = [(e.kind, e.subject) for e in h.events()]
        assert kinds == [("gap", "sampler"), ("gpu_error", "nvml"), ("note", "http://vllm:8000")]


def test_alert_incidents_fired_and_resolved(tmp_path):
    a = Alert("kv_usage_high", "warning", "KV full", "http://vllm:8000 engine 0", 0.95)
    with History(tmp_path / "h.sqlite3") as h:
        for t, alerts in [(1, []), (2, [a]), (3, [a]), (4, []), (5, [a])]:
            h.write(sample(t, [engine(kv=0.5)]), alerts)
        incidents = h.alerts()
        assert [(x.fired_ts, x.resolved_ts) for x in incidents] == [(2.0, 4.0), (5.0, None)]
        assert [len(r.alerts) for r in h.series()] == [0, 1, 0, 0, 1]
        assert [x.fired_ts for x in h.alerts(4.5, 10)] == [5.0]
    # a new writer closes incidents a stopped writer left open
    with History(tmp_path / "h.sqlite3") as h:
        assert h.alerts()[-1].resolved_ts == 5.0


def test_prune_in_batches(tmp_path):
    with History(tmp_path / "h.sqlite3") as h:
        _fill(h, 50)
        assert h.prune(1030.0, batch_ticks=7) == 30
        assert h.span() == (1030.0, 1049.0)
        assert len(list(h.gpu_series())) == 40
        assert len(list(h.endpoint_series())) == 20


def test_retention_prunes_while_writing(tmp_path, monkeypatch):
    import vramguard.monitor.history as hist
    monkeypatch.setattr(hist, "PRUNE_EVERY_TICKS", 10)
    with History(tmp_path / "h.sqlite3", retention_s=20) as h:
        _fill(h, 100)
        first, last = h.span()
        assert last == 1099.0 and first >= 1099.0 - 20 - 10


def test_buckets_aggregate(tmp_path):
    with History(tmp_path / "h.sqlite3") as h:
        _fill(h, 120, start=6000.0)
        rows = list(h.buckets(60))
        gpu0 = [b for b in rows if b.key == ("gpu", 0)]
        eps = [b for b in rows if b.key[0] == "endpoint"]
        assert len(gpu0) == 2 and gpu0[0].samples == 60
        assert eps[0].values["running"] == (0, 59, 29.5)
        assert eps[1].values["preemptions"][1] == 59
        assert eps[0].values["failures"] == (0, 0, 0)


def test_readonly_missing_file_and_bad_file(tmp_path):
    with pytest.raises(MonitorError, match="no history recorded"):
        History(tmp_path / "none.sqlite3", readonly=True)
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(MonitorError, match="history database"):
        History(bad)


def test_default_path_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("VRAMGUARD_DATA_DIR", str(tmp_path))
    assert default_history_path() == tmp_path / "history.sqlite3"
    monkeypatch.delenv("VRAMGUARD_DATA_DIR")
    assert default_history_path().name == "history.sqlite3"


def test_wal_and_reader_during_writes(tmp_path):
    path = tmp_path / "h.sqlite3"
    w = History(path)
    _fill(w, 5)
    r = History(path, readonly=True)
    assert r.count() == 5
    _fill(w, 5, start=2000)
    assert r.count() == 10
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    r.close()
    w.close()


@pytest.mark.integration
def test_crash_loses_nothing_committed(tmp_path):
    """SIGKILL a writer mid-run: every tick it reported committed is there, complete."""
    path = tmp_path / "h.sqlite3"
    script = Path(__file__).with_name("history_writer.py")
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE,
                            text=True)
    committed = 0
    try:
        for line in proc.stdout:
            committed = int(line)
            if committed >= 300:
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert committed >= 300
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ticks = conn.execute("SELECT count(*) FROM ticks").fetchone()[0]
    assert ticks >= committed
    partial = conn.execute("SELECT count(*) FROM (SELECT tick_id, count(*) AS n FROM gpu_samples "
                           "GROUP BY tick_id HAVING n != 8)").fetchone()[0]
    assert partial == 0
    assert conn.execute("SELECT count(*) FROM endpoint_samples").fetchone()[0] == ticks


def test_second_writer_is_refused_readers_are_not(tmp_path):
    path = tmp_path / "h.sqlite3"
    w = History(path)
    with pytest.raises(MonitorError, match=r"another vramguard process \(PID \d+\)"):
        History(path)
    History(path, readonly=True).close()
    w.close()
    History(path).close()                      # free again once the writer closed


def test_writer_whose_folder_cannot_be_made_is_a_clean_error(tmp_path, monkeypatch):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    with pytest.raises(MonitorError, match="cannot open the history file") as info:
        History(plain / "h.sqlite3")
    assert "--record" in info.value.line()
    monkeypatch.setenv("VRAMGUARD_DATA_DIR", str(plain))       # the default path, under a file
    with pytest.raises(MonitorError, match="cannot open the history file"):
        History()


def test_foreign_sqlite_file_is_refused_and_left_alone(tmp_path):
    foreign = tmp_path / "f.sqlite3"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE foo(x)")
    for readonly, flag in ((True, "--db"), (False, "--record")):
        with pytest.raises(MonitorError, match="not a vramguard history file") as info:
            History(foreign, readonly=readonly)
        assert flag in info.value.line()
    tables = sqlite3.connect(foreign).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("foo",)]
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    with pytest.raises(MonitorError, match="no history recorded yet"):
        History(empty, readonly=True)
    History(empty).close()                       # an empty file is a new history to a writer


def test_report_errors_name_its_own_option(tmp_path, capsys):
    from vramguard.cli import main
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"this is not a database" * 100)
    assert main(["report", "--db", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "another --db FILE" in err and "--record" not in err
    assert main(["report", "--db", str(tmp_path)]) == 2
    assert "a folder, not a history file" in capsys.readouterr().err
