"""Recorded history: one SQLite row set per tick, and the query API the report is built on.

Where: `--record FILE`, else `$VRAMGUARD_DATA_DIR/history.sqlite3`, else
`platformdirs.user_data_dir("vramguard")/history.sqlite3` (`default_history_path()`).

Writing (the sampler side)::

    with History(path, retention_s=7 * 86400) as h:
        h.write(sample, alerts)        # ONE transaction per tick (WAL, synchronous=NORMAL):
                                       # a crash loses at most the tick being written
Reading (the report side; safe while a writer is running)::

    h = History(path, readonly=True)
    h.span()                           # (first_ts, last_ts) or None
    for row in h.series(since_ts, until_ts):      # TickRow, oldest first, streamed
        row.ts, row.missed_ticks, row.gpu_error
        for g in row.gpus:      g.index, g.name, g.used_bytes, g.free_bytes, g.total_bytes
        for e in row.endpoints: e.url, e.engine, e.ok, e.kv_cache_usage,
                                e.num_requests_running, e.num_requests_waiting,
                                e.num_preemptions_total, e.prompt_tokens_total,
                                e.generation_tokens_total, e.kv_pool_tokens, e.error
        row.alerts              # AlertRows that fired at this tick
    h.gpu_series(since, until, gpu_index=None)    # flat GpuRow iterator
    h.endpoint_series(since, until, url=None)     # flat EndpointRow iterator
    h.buckets(step_s, since, until)               # BucketRow per step: min/max/avg per series
    h.alerts(since, until)                        # AlertRow incidents (fired_ts, resolved_ts)
    h.events(since, until)                        # EventRow: gaps, counter resets, NVML loss

Timestamps are UNIX seconds (floats). Rows stream from cursors in tick order, so a 24-hour
history at 1 s is read in bounded memory. Retention prunes old ticks in batches, each batch
its own short transaction. Every sqlite3 error becomes a MonitorError naming the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ..errors import MonitorError
from .rules import ActiveAlerts, Alert
from .sampler import Sample

SCHEMA_VERSION = 1
PRUNE_EVERY_TICKS = 600
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS ticks(id INTEGER PRIMARY KEY, ts REAL NOT NULL, missed INTEGER NOT NULL
    DEFAULT 0, duration_s REAL, gpu_error TEXT);
CREATE INDEX IF NOT EXISTS ticks_ts ON ticks(ts);
CREATE TABLE IF NOT EXISTS gpus(id INTEGER PRIMARY KEY, idx INTEGER, uuid TEXT, name TEXT,
    total_bytes INTEGER, UNIQUE(idx, uuid, name, total_bytes));
CREATE TABLE IF NOT EXISTS gpu_samples(tick_id INTEGER NOT NULL, gpu_id INTEGER NOT NULL,
    used_bytes INTEGER, free_bytes INTEGER, util_pct REAL,
    PRIMARY KEY(tick_id, gpu_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS series(id INTEGER PRIMARY KEY, url TEXT NOT NULL, engine TEXT NOT NULL,
    model_name TEXT NOT NULL DEFAULT '', UNIQUE(url, engine, model_name));
CREATE TABLE IF NOT EXISTS endpoint_samples(tick_id INTEGER NOT NULL, series_id INTEGER NOT NULL,
    ok INTEGER NOT NULL, kv_usage REAL, running INTEGER, waiting INTEGER,
    waiting_capacity INTEGER, waiting_deferred INTEGER, swapped INTEGER, preemptions INTEGER,
    prompt_tokens INTEGER, generation_tokens INTEGER, kv_pool_tokens INTEGER, latency_s REAL,
    error TEXT, PRIMARY KEY(tick_id, series_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS configs(series_id INTEGER NOT NULL, ts REAL NOT NULL, config TEXT);
CREATE TABLE IF NOT EXISTS alerts(id INTEGER PRIMARY KEY, rule TEXT, severity TEXT, subject TEXT,
    message TEXT, fired_ts REAL NOT NULL, fired_tick INTEGER, resolved_ts REAL);
CREATE INDEX IF NOT EXISTS alerts_fired ON alerts(fired_ts);
CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY, ts REAL NOT NULL, tick_id INTEGER,
    kind TEXT, subject TEXT, detail TEXT);
CREATE INDEX IF NOT EXISTS events_ts ON events(ts);
"""


def default_history_path() -> Path:
    """`$VRAMGUARD_DATA_DIR/history.sqlite3` or the platform's user data dir."""
    base = os.environ.get("VRAMGUARD_DATA_DIR")
    if not base:
        import platformdirs
        base = platformdirs.user_data_dir("vramguard")
    return Path(base) / "history.sqlite3"


@dataclass(frozen=True)
class GpuRow:
    ts: float
    tick: int
    index: int
    uuid: str | None
    name: str | None
    total_bytes: int | None
    used_bytes: int | None
    free_bytes: int | None
    utilization_pct: float | None


@dataclass(frozen=True)
class EndpointRow:
    """One engine of one endpoint at one tick (`engine == ""` and ok=False when it failed)."""

    ts: float
    tick: int
    url: str
    engine: str
    model_name: str | None
    ok: bool
    kv_cache_usage: float | None
    num_requests_running: int | None
    num_requests_waiting: int | None
    waiting_capacity: int | None
    waiting_deferred: int | None
    num_requests_swapped: int | None
    num_preemptions_total: int | None
    prompt_tokens_total: int | None
    generation_tokens_total: int | None
    kv_pool_tokens: int | None
    latency_s: float | None
    error: str | None


@dataclass(frozen=True)
class AlertRow:
    rule: str
    severity: str
    subject: str
    message: str
    fired_ts: float
    resolved_ts: float | None     # None: still firing (or the writer stopped)


@dataclass(frozen=True)
class EventRow:
    ts: float
    kind: str                     # "gap" | "note" | "gpu_error" | "gpu_ok"
    subject: str
    detail: str


@dataclass(frozen=True)
class TickRow:
    ts: float
    tick: int
    missed_ticks: int
    gpu_error: str | None
    gpus: tuple[GpuRow, ...]
    endpoints: tuple[EndpointRow, ...]
    alerts: tuple[AlertRow, ...]


@dataclass(frozen=True)
class BucketRow:
    """Aggregates of one series over [start_ts, start_ts + step_s).

    `key` is ("gpu", index) or ("endpoint", url, engine); `values` maps a column to
    (min, max, avg) - e.g. "used_bytes", "free_bytes", "kv_cache_usage", "waiting", "running",
    "preemptions" (for counters, use max - previous max for the increase).
    """

    start_ts: float
    key: tuple
    samples: int
    values: dict[str, tuple[float | None, float | None, float | None]]


class History:
    """The history database (see the module docstring for the API)."""

    def __init__(self, path: str | os.PathLike | None = None, *, readonly: bool = False,
                 retention_s: float | None = None):
        self.path = Path(path).expanduser() if path else default_history_path()
        self.readonly = readonly
        self.retention_s = retention_s
        self._gpu_ids: dict[tuple, int] = {}
        self._series_ids: dict[tuple, int] = {}
        self._configs: dict[int, str] = {}
        self._gpu_error: str | None = None
        self._alerts = ActiveAlerts()
        self._alert_ids: dict[tuple[str, str], int] = {}
        self._writes = 0
        self._lock_file = None
        with self._errors("open"):
            self._conn = self._connect()

    # ---- connection -------------------------------------------------------------------
    def _errors(self, what: str):
        # NOTE: the fix names the option of the command at hand: report's --db, else --record
        return _SqliteErrors(self.path, what, "--db" if self.readonly else "--record")

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            return self._connect_readonly()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_writer()
        except OSError as exc:       # NOTE: e.g. a parent that is a file, or read-only
            raise MonitorError(f"cannot open the history file: {exc}", where=str(self.path),
                               fix="Check the path, or pass another --record FILE / set "
                                   "VRAMGUARD_DATA_DIR.") from None
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=5000")
        self._check_tables(conn)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        conn.execute("INSERT OR IGNORE INTO meta VALUES('schema_version', ?)",
                     (str(SCHEMA_VERSION),))
        # alerts left firing by a writer that stopped: close them at its last tick
        conn.execute("UPDATE alerts SET resolved_ts=(SELECT max(ts) FROM ticks) "
                     "WHERE resolved_ts IS NULL")
        return conn

    def _connect_readonly(self) -> sqlite3.Connection:
        if not self.path.exists():
            raise MonitorError("no history recorded yet", where=str(self.path),
                               fix="Run `vramguard watch` (it records by default) or "
                                   "pass the file given to --record.")
        if self.path.is_dir():
            raise MonitorError("this is a folder, not a history file", where=str(self.path),
                               fix="Pass the file given to `vramguard watch --record`.")
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                               isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=5000")
        self._check_tables(conn)
        return conn

    def _check_tables(self, conn: sqlite3.Connection) -> None:
        """Refuse a database that is not a history file (MonitorError).

        NOTE: a writer would add its tables to somebody else's SQLite file, and a reader
        would only say "no such table"; an empty file is a new history for a writer."""
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "ticks" in tables or not (tables or self.readonly):
            return
        conn.close()
        if tables:
            raise MonitorError("this file is not a vramguard history file", where=str(self.path),
                               fix="Pass the --db FILE that `vramguard watch --record` wrote."
                               if self.readonly else "Pass another --record FILE: a new one, "
                               "or one that vramguard wrote.")
        raise MonitorError("no history recorded yet (the file is empty)", where=str(self.path),
                           fix="Run `vramguard watch` (it records by default) or pass the file "
                               "given to --record.")

    def _lock_writer(self) -> None:
        """One writer per file: a second `watch` recording to it would interleave ticks."""
        try:
            import fcntl
        except ImportError:          # NOTE: no advisory locks on Windows; SQLite still copes
            return
        lock_path = self.path.with_name(self.path.name + ".lock")
        handle = open(lock_path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip() or "?"
            handle.close()
            raise MonitorError(f"another vramguard process (PID {owner}) is recording here",
                               where=str(self.path),
                               fix="Pass another --record FILE, or --no-record.") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock_file = handle

    def close(self) -> None:
        with self._errors("close"):
            self._conn.close()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- writing ----------------------------------------------------------------------
    def write(self, sample: Sample, alerts: Sequence[Alert] | None = None) -> int:
        """Record one tick (and alert transitions) in one transaction; returns the tick id."""
        with self._errors("write"):
            cur = self._conn.cursor()
            cur.execute("BEGIN")
            try:
                tick_id = self._write_tick(cur, sample, alerts)
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        self._writes += 1
        if self.retention_s and self._writes % PRUNE_EVERY_TICKS == 1:
            self.prune(sample.ts - self.retention_s)
        return tick_id

    def _write_tick(self, cur: sqlite3.Cursor, sample: Sample, alerts) -> int:
        cur.execute("INSERT INTO ticks(ts, missed, duration_s, gpu_error) VALUES(?,?,?,?)",
                    (sample.ts, sample.missed_ticks, sample.duration_s, sample.gpu_error))
        tick_id = cur.lastrowid
        if sample.missed_ticks:
            self._event(cur, sample.ts, tick_id, "gap", "sampler",
                        f"{sample.missed_ticks} tick(s) missed before this one")
        if sample.gpu_error != self._gpu_error and sample.gpu_error:
            self._event(cur, sample.ts, tick_id, "gpu_error", "nvml", sample.gpu_error)
        elif self._gpu_error and not sample.gpu_error:
            self._event(cur, sample.ts, tick_id, "gpu_ok", "nvml", "GPU sampling resumed")
        self._gpu_error = sample.gpu_error
        cur.executemany("INSERT INTO gpu_samples VALUES(?,?,?,?,?)", [
            (tick_id, self._gpu_id(cur, g), _used(g), g.free_bytes, g.utilization_pct)
            for g in sample.gpus])
        rows = []
        for ep in sample.endpoints:
            for note in ep.notes:
                self._event(cur, sample.ts, tick_id, "note", ep.url, note)
            rows += self._endpoint_rows(cur, tick_id, sample.ts, ep)
        cur.executemany("INSERT OR REPLACE INTO endpoint_samples VALUES"
                        "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        if alerts is not None:
            self._write_alerts(cur, sample, tick_id, alerts)
        return tick_id

    def _endpoint_rows(self, cur, tick_id: int, ts: float, ep) -> list[tuple]:
        if not ep.ok or not ep.engines:
            sid = self._series_id(cur, ep.url, "", "")
            return [(tick_id, sid, 0, None, None, None, None, None, None, None, None, None,
                     None, ep.latency_s, ep.error or "no engines")]
        rows = []
        for e in ep.engines:
            sid = self._series_id(cur, ep.url, e.engine, e.model_name or "")
            config = json.dumps(e.cache_config, sort_keys=True)
            if self._configs.get(sid) != config:
                cur.execute("INSERT INTO configs VALUES(?,?,?)", (sid, ts, config))
                self._configs[sid] = config
            reasons = e.waiting_by_reason
            rows.append((tick_id, sid, 1, e.kv_cache_usage, e.num_requests_running,
                         e.num_requests_waiting, reasons.get("capacity"), reasons.get("deferred"),
                         e.num_requests_swapped, e.num_preemptions_total, e.prompt_tokens_total,
                         e.generation_tokens_total, e.kv_pool_tokens, ep.latency_s, None))
        return rows

    def _write_alerts(self, cur, sample: Sample, tick_id: int, alerts) -> None:
        fired, resolved = self._alerts.update(alerts)
        for a in fired:
            cur.execute("INSERT INTO alerts(rule, severity, subject, message, fired_ts, "
                        "fired_tick) VALUES(?,?,?,?,?,?)",
                        (a.rule, a.severity, a.subject, a.message, sample.ts, tick_id))
            self._alert_ids[a.key] = cur.lastrowid
        for a in resolved:
            row_id = self._alert_ids.pop(a.key, None)
            if row_id is not None:
                cur.execute("UPDATE alerts SET resolved_ts=? WHERE id=?", (sample.ts, row_id))

    def _event(self, cur, ts, tick_id, kind, subject, detail) -> None:
        cur.execute("INSERT INTO events(ts, tick_id, kind, subject, detail) VALUES(?,?,?,?,?)",
                    (ts, tick_id, kind, subject, detail))

    def _gpu_id(self, cur, gpu) -> int:
        key = (gpu.index, gpu.uuid, gpu.spec.name, gpu.spec.total_bytes)
        if key not in self._gpu_ids:
            cur.execute("INSERT OR IGNORE INTO gpus(idx, uuid, name, total_bytes) "
                        "VALUES(?,?,?,?)", key)
            cur.execute("SELECT id FROM gpus WHERE idx=? AND uuid IS ? AND name IS ? "
                        "AND total_bytes IS ?", key)
            self._gpu_ids[key] = cur.fetchone()[0]
        return self._gpu_ids[key]

    def _series_id(self, cur, url: str, engine: str, model: str) -> int:
        key = (url, engine, model)
        if key not in self._series_ids:
            cur.execute("INSERT OR IGNORE INTO series(url, engine, model_name) VALUES(?,?,?)",
                        key)
            cur.execute("SELECT id FROM series WHERE url=? AND engine=? AND model_name=?", key)
            self._series_ids[key] = cur.fetchone()[0]
        return self._series_ids[key]

    def prune(self, older_than_ts: float, *, batch_ticks: int = 5000) -> int:
        """Delete ticks (and their rows) older than `older_than_ts`, in batches; returns ticks."""
        removed = 0
        with self._errors("prune"):
            while True:
                row = self._conn.execute(
                    "SELECT max(id), count(*) FROM (SELECT id FROM ticks WHERE ts < ? "
                    "ORDER BY id LIMIT ?)", (older_than_ts, batch_ticks)).fetchone()
                if not row or row[0] is None:
                    break
                self._conn.execute("BEGIN")
                for table in ("gpu_samples", "endpoint_samples"):
                    self._conn.execute(f"DELETE FROM {table} WHERE tick_id <= ?", (row[0],))
                self._conn.execute("DELETE FROM ticks WHERE id <= ?", (row[0],))
                self._conn.execute("DELETE FROM events WHERE ts < ?", (older_than_ts,))
                self._conn.execute("DELETE FROM alerts WHERE resolved_ts < ?", (older_than_ts,))
                self._conn.execute("COMMIT")
                removed += row[1]
        return removed

    # ---- reading ----------------------------------------------------------------------
    def span(self) -> tuple[float, float] | None:
        """(first_ts, last_ts) of the recorded ticks, or None when empty."""
        with self._errors("read"):
            first, last = self._conn.execute("SELECT min(ts), max(ts) FROM ticks").fetchone()
        return None if first is None else (first, last)

    def count(self) -> int:
        with self._errors("read"):
            return self._conn.execute("SELECT count(*) FROM ticks").fetchone()[0]

    def _tick_range(self, since_ts, until_ts) -> tuple[int, int] | None:
        lo = -1e300 if since_ts is None else since_ts
        hi = 1e300 if until_ts is None else until_ts
        first, last = self._conn.execute("SELECT min(id), max(id) FROM ticks WHERE ts >= ? "
                                         "AND ts <= ?", (lo, hi)).fetchone()
        return None if first is None else (first, last)

    def gpu_series(self, since_ts: float | None = None, until_ts: float | None = None,
                   gpu_index: int | None = None) -> Iterator[GpuRow]:
        """GpuRows in tick order (optionally one GPU)."""
        return self._series(self._gpu_rows, since_ts, until_ts, gpu_index)

    def _series(self, rows, since_ts, until_ts, key) -> Iterator:
        """`rows(tick_ids, key)`'s rows over the time range, read lazily, errors translated."""
        with self._errors("read"):
            ids = self._tick_range(since_ts, until_ts)
            if ids is not None:
                for _, row in rows(ids, key):
                    yield row

    def _gpu_rows(self, ids, gpu_index=None) -> Iterator[tuple[int, GpuRow]]:
        sql = ("SELECT t.ts, s.tick_id, g.idx, g.uuid, g.name, g.total_bytes, s.used_bytes, "
               "s.free_bytes, s.util_pct FROM gpu_samples s JOIN ticks t ON t.id = s.tick_id "
               "JOIN gpus g ON g.id = s.gpu_id WHERE s.tick_id BETWEEN ? AND ?")
        args: list = list(ids)
        if gpu_index is not None:
            sql += " AND g.idx = ?"
            args.append(gpu_index)
        cur = self._conn.cursor()
        cur.execute(sql + " ORDER BY s.tick_id, g.idx", args)
        return ((row[1], GpuRow(*row)) for row in cur)

    def endpoint_series(self, since_ts: float | None = None, until_ts: float | None = None,
                        url: str | None = None) -> Iterator[EndpointRow]:
        """EndpointRows in tick order (optionally one URL)."""
        return self._series(self._endpoint_rows_read, since_ts, until_ts, url)

    def _endpoint_rows_read(self, ids, url=None) -> Iterator[tuple[int, EndpointRow]]:
        sql = ("SELECT t.ts, s.tick_id, r.url, r.engine, r.model_name, s.ok, s.kv_usage, "
               "s.running, s.waiting, s.waiting_capacity, s.waiting_deferred, s.swapped, "
               "s.preemptions, s.prompt_tokens, s.generation_tokens, s.kv_pool_tokens, "
               "s.latency_s, s.error FROM endpoint_samples s JOIN ticks t ON t.id = s.tick_id "
               "JOIN series r ON r.id = s.series_id WHERE s.tick_id BETWEEN ? AND ?")
        args: list = list(ids)
        if url is not None:
            sql += " AND r.url = ?"
            args.append(url)
        cur = self._conn.cursor()
        cur.execute(sql + " ORDER BY s.tick_id, r.url, r.engine", args)
        return ((row[1], EndpointRow(*row[:4], row[4] or None, bool(row[5]), *row[6:]))
                for row in cur)

    def series(self, since_ts: float | None = None,
               until_ts: float | None = None) -> Iterator[TickRow]:
        """One TickRow per recorded tick in [since_ts, until_ts], oldest first (streamed)."""
        with self._errors("read"):
            ids = self._tick_range(since_ts, until_ts)
            if ids is None:
                return
            gpus = _Peek(self._gpu_rows(ids))
            eps = _Peek(self._endpoint_rows_read(ids))
            fired = _Peek(self._alerts_by_tick(*ids))
            ticks = self._conn.cursor().execute(
                "SELECT id, ts, missed, gpu_error FROM ticks WHERE id BETWEEN ? AND ? "
                "ORDER BY id", ids)
            for tick_id, ts, missed, gpu_error in ticks:
                yield TickRow(ts, tick_id, missed, gpu_error, gpus.take(tick_id),
                              eps.take(tick_id), fired.take(tick_id))

    def _alerts_by_tick(self, first: int, last: int) -> Iterator[tuple[int, AlertRow]]:
        rows = self._conn.cursor().execute(
            "SELECT fired_tick, rule, severity, subject, message, fired_ts, resolved_ts "
            "FROM alerts WHERE fired_tick BETWEEN ? AND ? ORDER BY fired_tick", (first, last))
        return ((tick_id, AlertRow(*rest)) for tick_id, *rest in rows)

    def alerts(self, since_ts: float | None = None,
               until_ts: float | None = None) -> list[AlertRow]:
        """Alert incidents overlapping [since_ts, until_ts], by fired time."""
        lo = -1e300 if since_ts is None else since_ts
        hi = 1e300 if until_ts is None else until_ts
        with self._errors("read"):
            rows = self._conn.execute(
                "SELECT rule, severity, subject, message, fired_ts, resolved_ts FROM alerts "
                "WHERE fired_ts <= ? AND (resolved_ts IS NULL OR resolved_ts >= ?) "
                "ORDER BY fired_ts, id", (hi, lo)).fetchall()
        return [AlertRow(*r) for r in rows]

    def events(self, since_ts: float | None = None,
               until_ts: float | None = None) -> list[EventRow]:
        lo = -1e300 if since_ts is None else since_ts
        hi = 1e300 if until_ts is None else until_ts
        with self._errors("read"):
            rows = self._conn.execute("SELECT ts, kind, subject, detail FROM events WHERE ts "
                                      "BETWEEN ? AND ? ORDER BY ts, id", (lo, hi)).fetchall()
        return [EventRow(*r) for r in rows]

    def cache_configs(self) -> dict[tuple[str, str], dict[str, str]]:
        """The latest vllm:cache_config_info labels per (url, engine)."""
        with self._errors("read"):
            rows = self._conn.execute(
                "SELECT r.url, r.engine, c.config FROM configs c JOIN series r "
                "ON r.id = c.series_id ORDER BY c.ts").fetchall()
        return {(url, engine): json.loads(config) for url, engine, config in rows}

    def buckets(self, step_s: float, since_ts: float | None = None,
                until_ts: float | None = None) -> Iterator[BucketRow]:
        """Per-series min/max/avg over fixed steps (aggregated in SQL: bounded memory)."""
        lo = -1e300 if since_ts is None else since_ts
        hi = 1e300 if until_ts is None else until_ts
        with self._errors("read"):
            ids = self._tick_range(since_ts, until_ts)
            if ids is None or step_s <= 0:
                return
            yield from self._gpu_buckets(step_s, ids, lo, hi)
            yield from self._endpoint_buckets(step_s, ids)

    def _gpu_buckets(self, step_s, ids, lo, hi) -> Iterator[BucketRow]:
        cols = ("used_bytes", "free_bytes")
        agg = ", ".join(f"min(s.{c}), max(s.{c}), avg(s.{c})" for c in cols)
        sql = (f"SELECT CAST(t.ts / ? AS INTEGER) AS b, g.idx, count(*), {agg} FROM gpu_samples s "
               "JOIN ticks t ON t.id = s.tick_id JOIN gpus g ON g.id = s.gpu_id "
               "WHERE s.tick_id BETWEEN ? AND ? GROUP BY b, g.idx ORDER BY b, g.idx")
        for row in self._conn.execute(sql, (step_s, *ids)):
            yield BucketRow(row[0] * step_s, ("gpu", row[1]), row[2], _triples(cols, row[3:]))

    def _endpoint_buckets(self, step_s, ids) -> Iterator[BucketRow]:
        cols = ("kv_usage", "running", "waiting", "preemptions", "prompt_tokens",
                "generation_tokens")
        names = ("kv_cache_usage", "running", "waiting", "preemptions", "prompt_tokens",
                 "generation_tokens")
        agg = ", ".join(f"min(s.{c}), max(s.{c}), avg(s.{c})" for c in cols)
        sql = (f"SELECT CAST(t.ts / ? AS INTEGER) AS b, r.url, r.engine, count(*), "
               f"sum(1 - s.ok), {agg} FROM endpoint_samples s JOIN ticks t ON t.id = s.tick_id "
               "JOIN series r ON r.id = s.series_id WHERE s.tick_id BETWEEN ? AND ? "
               "GROUP BY b, r.url, r.engine ORDER BY b, r.url, r.engine")
        for row in self._conn.execute(sql, (step_s, *ids)):
            values = _triples(names, row[5:])
            values["failures"] = (row[4], row[4], row[4])
            yield BucketRow(row[0] * step_s, ("endpoint", row[1], row[2]), row[3], values)


def _triples(names: Sequence[str], flat: Sequence) -> dict:
    return {n: (flat[3 * i], flat[3 * i + 1], flat[3 * i + 2]) for i, n in enumerate(names)}


def _used(gpu) -> int | None:
    if gpu.used_bytes is not None:
        return gpu.used_bytes
    return gpu.spec.total_bytes - gpu.free_bytes


class _Peek:
    """Takes the rows of one tick from a tick-ordered iterator of (tick_id, row)."""

    def __init__(self, pairs: Iterable[tuple[int, object]]):
        self._it = iter(pairs)
        self._next = next(self._it, None)

    def take(self, tick_id: int) -> tuple:
        nxt = self._next
        if nxt is None or nxt[0] > tick_id:
            return ()
        out, it = [], self._it
        while nxt is not None and nxt[0] <= tick_id:
            if nxt[0] == tick_id:
                out.append(nxt[1])
            nxt = next(it, None)
        self._next = nxt
        return tuple(out)


class _SqliteErrors:
    """Context manager: sqlite3.Error -> MonitorError naming the file."""

    def __init__(self, path: Path, what: str, flag: str = "--record"):
        self.path, self.what, self.flag = path, what, flag

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and issubclass(exc_type, sqlite3.Error):
            raise MonitorError(f"history database {self.what} failed ({exc})",
                               where=str(self.path),
                               fix="Check the disk and permissions, or pass another "
                                   f"{self.flag} FILE.") from None
        return False

