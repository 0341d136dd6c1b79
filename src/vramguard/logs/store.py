"""The local calibration store: one SQLite file (WAL) of startups seen by `vramguard calibrate`.

Where: `--db FILE`, else `$VRAMGUARD_DATA_DIR/calibration.sqlite3`, else
`platformdirs.user_data_dir("vramguard")/calibration.sqlite3`.

`load_calibration(key)` is what the planner's caller uses: the newest matching startup's
terms, or None (also when the store does not exist or cannot be read — a plan never fails
because of it).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.calibration import Calibration, CalibrationKey
from ..errors import MonitorError

DB_NAME = "calibration.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS startups (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    seen_at REAL NOT NULL,
    digest TEXT UNIQUE NOT NULL,
    source TEXT,
    model TEXT,
    model_family TEXT NOT NULL,
    gpu TEXT NOT NULL,
    vllm_version TEXT NOT NULL,
    engine TEXT,
    tp INTEGER NOT NULL,
    pp INTEGER NOT NULL,
    flags TEXT NOT NULL,
    outcome TEXT,
    kv_pool_gib REAL,
    kv_tokens INTEGER,
    max_concurrency REAL,
    concurrency_tokens INTEGER,
    weights_bytes INTEGER,
    activation_bytes INTEGER,
    non_torch_bytes INTEGER,
    cuda_graph_bytes INTEGER,
    max_num_batched_tokens INTEGER,
    max_num_seqs INTEGER,
    derivation TEXT,
    notes TEXT
);
CREATE INDEX IF NOT EXISTS startups_key ON startups (gpu, vllm_version, model_family, tp, pp);
"""


def default_db_path() -> Path:
    """`$VRAMGUARD_DATA_DIR/calibration.sqlite3` or the platform's user data dir."""
    import sys
    base = os.environ.get("VRAMGUARD_DATA_DIR")
    if not base and sys.platform.startswith("linux"):
        # NOTE: platformdirs' XDG rule, without importing it (plan's cold start reads the store)
        xdg = os.environ.get("XDG_DATA_HOME", "").strip() or os.path.expanduser("~/.local/share")
        base = os.path.join(xdg, "vramguard")
    elif not base:
        import platformdirs
        base = platformdirs.user_data_dir("vramguard")
    return Path(base) / DB_NAME


def default_db_may_exist() -> bool:
    """False only when the default store certainly does not exist — its folder is missing
    (`default_db_path`, which imports nothing on Linux and with VRAMGUARD_DATA_DIR). True
    elsewhere: then ask default_db_path."""
    import sys
    if os.environ.get("VRAMGUARD_DATA_DIR") or sys.platform.startswith("linux"):
        return default_db_path().parent.is_dir()
    return True


@dataclass(frozen=True)
class Startup:
    """One row: a startup calibrate has seen."""

    id: int
    seen_at: float
    source: str | None
    model: str | None
    model_family: str
    gpu: str
    vllm_version: str
    engine: str | None
    tp: int
    pp: int
    flags: dict
    outcome: str | None
    kv_pool_gib: float | None
    kv_tokens: int | None
    max_concurrency: float | None
    concurrency_tokens: int | None
    weights_bytes: int | None
    activation_bytes: int | None
    non_torch_bytes: int | None
    cuda_graph_bytes: int | None
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    derivation: str | None
    notes: tuple[str, ...]

    @property
    def key(self) -> CalibrationKey:
        return CalibrationKey(self.gpu, self.vllm_version, self.model_family, self.tp, self.pp)

    def calibration(self) -> Calibration:
        return Calibration(key=self.key, activation_bytes=self.activation_bytes,
                           non_torch_bytes=self.non_torch_bytes,
                           cuda_graph_bytes=self.cuda_graph_bytes,
                           weights_bytes=self.weights_bytes,
                           max_num_batched_tokens=self.max_num_batched_tokens,
                           max_num_seqs=self.max_num_seqs, model=self.model, source=self.source)

    def to_dict(self) -> dict:
        d = dict(vars(self))
        d["notes"] = list(self.notes)
        return d


# NOTE: SQLite's INTEGER range: no id is larger, and a larger bound fails to bind.
_SQLITE_INT_MAX = 2**63 - 1
_COLUMNS = [f for f in Startup.__dataclass_fields__]
_WRITE_COLUMNS = [c for c in _COLUMNS if c != "id"] + ["digest"]


class Store:
    """The calibration database. Use as a context manager, or call close()."""

    def __init__(self, path: str | os.PathLike | None = None, *, create: bool = True):
        import sqlite3
        self.path = Path(path) if path else default_db_path()
        if not create and not self.path.exists():
            raise MonitorError("no calibration store yet", where=str(self.path),
                               fix="Run `vramguard calibrate LOG` first")
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(self.path), timeout=10)
            if self._check_tables(create):
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise MonitorError(f"cannot open the calibration store: {exc}", where=str(self.path),
                               fix="Check the path, or pass --db / set VRAMGUARD_DATA_DIR"
                               ) from None

    def _check_tables(self, create: bool) -> bool:
        """Whether to write the schema: only with `create`, into a store or an empty file.

        NOTE: never adds tables to somebody else's SQLite file, and read-only uses (history,
        plan) never write at all. Raises MonitorError for a file that is not a store."""
        tables = {r[0] for r in self.db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "startups" in tables or (create and not tables):
            return create
        self.db.close()
        if tables:
            raise MonitorError("this file is not a vramguard calibration store",
                               where=str(self.path),
                               fix="Pass the --db FILE that `vramguard calibrate` wrote")
        raise MonitorError("no calibration store yet (the file is empty)", where=str(self.path),
                           fix="Run `vramguard calibrate LOG` first")

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def add(self, row: dict) -> tuple[int, bool]:
        """Insert (or refresh, same digest) one startup. Returns (id, was_new)."""
        import sqlite3
        row = {k: utf8_text(v) for k, v in dict(row).items()}
        row["flags"] = json.dumps(row.get("flags") or {}, sort_keys=True, default=str)
        row["notes"] = json.dumps(list(row.get("notes") or ()))
        row.setdefault("seen_at", time.time())
        cols = [c for c in _WRITE_COLUMNS if c in row]
        try:
            with self.db:
                cur = self.db.execute("SELECT id FROM startups WHERE digest = ?", (row["digest"],))
                hit = cur.fetchone()
                if hit:
                    sets = ", ".join(f"{c} = ?" for c in cols)
                    self.db.execute(f"UPDATE startups SET {sets} WHERE id = ?",
                                    [row[c] for c in cols] + [hit[0]])
                    return hit[0], False
                cur = self.db.execute(
                    f"INSERT INTO startups ({', '.join(cols)}) VALUES "
                    f"({', '.join('?' for _ in cols)})", [row[c] for c in cols])
                return cur.lastrowid, True
        except sqlite3.Error as exc:
            raise MonitorError(f"cannot write the calibration store: {exc}",
                               where=str(self.path)) from None

    def startups(self, limit: int | None = None) -> list[Startup]:
        """Newest first."""
        sql = f"SELECT {', '.join(_COLUMNS)} FROM startups ORDER BY seen_at DESC, id DESC"
        if limit:
            sql += f" LIMIT {min(int(limit), _SQLITE_INT_MAX)}"
        return self._rows(sql, ())

    def _rows(self, sql: str, params: tuple) -> list[Startup]:
        """The rows of a query, or MonitorError when the file is not a store of this schema
        (another program's database, a hand-edited row)."""
        import sqlite3
        try:
            return [_row(r) for r in self.db.execute(sql, params)]
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise MonitorError(f"not a vramguard calibration store ({exc})", where=str(self.path),
                               fix="Pass the store `vramguard calibrate` wrote, or a new --db "
                                   "path") from None

    def get(self, startup_id: int) -> Startup | None:
        """The startup with this id, or None."""
        if abs(int(startup_id)) > _SQLITE_INT_MAX:
            return None
        rows = self._rows(f"SELECT {', '.join(_COLUMNS)} FROM startups WHERE id = ?",
                          (int(startup_id),))
        return rows[0] if rows else None

    def matching(self, key: CalibrationKey) -> list[Startup]:
        """Startups with this key that have learned terms, newest first."""
        return self._rows(
            f"SELECT {', '.join(_COLUMNS)} FROM startups WHERE gpu = ? AND vllm_version = ? AND "
            "model_family = ? AND tp = ? AND pp = ? AND activation_bytes IS NOT NULL "
            "ORDER BY seen_at DESC, id DESC",
            (key.gpu_name, key.vllm_version, key.model_family, key.tensor_parallel_size,
             key.pipeline_parallel_size))


def utf8_text(value):
    """A string that encodes as UTF-8 (SQLite, an HTML page): undecodable bytes of a file name
    or argument (Python's surrogate escapes) become U+FFFD; other values unchanged."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return value


def _row(r) -> Startup:
    d = dict(zip(_COLUMNS, r))
    d["flags"] = json.loads(d["flags"] or "{}")
    d["notes"] = tuple(json.loads(d["notes"] or "[]"))
    return Startup(**d)


_WEIGHT_FLAGS = ("dtype", "quantization")


def load_calibration(key: CalibrationKey, db: str | os.PathLike | None = None, *,
                     model: str | None = None, settings=None,
                     problems: list[str] | None = None) -> Calibration | None:
    """The newest calibration learned for `key` on this machine, or None.

    For `vramguard plan`: never creates the store and never raises (an unreadable store
    just means "no calibration"). `model` (the id/path planned) prefers startups of that
    exact model; the learned weights are only kept when the model is the same and the
    dtype / quantization flags agree with `settings` (a core.settings.Settings), since
    weights do not carry over between checkpoints or dtypes. `problems` receives why the
    store could not be read (for a `--db` given on purpose).
    """
    path = Path(db) if db else default_db_path()
    if not path.exists():
        if problems is not None:
            problems.append("no such file")
        return None
    import dataclasses

    from .versions import normalize_version   # NOTE: not .fields (every log pattern)
    query = dataclasses.replace(key, vllm_version=normalize_version(key.vllm_version)
                                or key.vllm_version)
    try:
        with Store(path, create=False) as store:
            rows = store.matching(query)
    except Exception as exc:    # NOTE: a broken store must not break planning
        if problems is not None:
            problems.append(getattr(exc, "what", None) or str(exc))
        return None
    if not rows:
        return None
    same = [r for r in rows if model and r.model == model]
    hit = (same or rows)[0]
    cal = hit.calibration()
    if not same or not _same_weight_flags(hit.flags, settings):
        cal = dataclasses.replace(cal, weights_bytes=None)
    # NOTE: matched on the normalised version; hand back the caller's key so that
    # Calibration.matches(key) holds for "0.19" as well as "0.19.0".
    return dataclasses.replace(cal, key=key)


def _same_weight_flags(flags: dict, settings) -> bool:
    if settings is None:
        return True
    for name in _WEIGHT_FLAGS:
        logged = flags.get(name)
        mine = getattr(settings, name, None)
        norm = {None: "auto", "auto": "auto"}
        if norm.get(logged, str(logged)) != norm.get(mine, str(mine)):
            return False
    return True
