"""The embedded model catalog: published config.json files shipped with vramguard.

Each model is one file `data/catalog/models/<org>__<name>.json` holding
`{"model_id", "aliases", "source", "published_params", "config"}`. Looking up an id reads
one file (the name is derived from the id); only a miss (an alias, a different case) lists
the directory, and only an alias miss reads every file. Ids match case-insensitively.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SourceError

_MAX_ENTRY_BYTES = 8 << 20


@dataclass(frozen=True)
class CatalogEntry:
    """One catalog model: its id, aliases, where the config came from, and the config."""

    model_id: str
    aliases: tuple[str, ...] = ()
    source: str = ""
    published_params: str | None = None
    config: dict = field(default_factory=dict, repr=False)
    path: str | None = None


def catalog_dir() -> Path:
    """The folder of catalog files (overridable with VRAMGUARD_CATALOG_DIR, for tests)."""
    override = os.environ.get("VRAMGUARD_CATALOG_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parent.parent / "data" / "catalog" / "models"


def file_name(model_id: str) -> str:
    """`org/name` -> `org__name.json`."""
    return model_id.strip().replace("/", "__") + ".json"


def load_entry(path: Path) -> CatalogEntry:
    """Read and check one catalog file."""
    where = str(path)
    try:
        if path.stat().st_size > _MAX_ENTRY_BYTES:
            raise SourceError("catalog file is larger than 8 MiB", where=where,
                              fix="Catalog files hold one config.json; check the file")
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SourceError(f"cannot read catalog file ({exc.strerror or exc})", where=where,
                          fix="Reinstall vramguard") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise SourceError(f"catalog file is not valid JSON ({str(exc)[:120]})", where=where,
                          fix="Fix the catalog file") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_id"), str) \
            or not isinstance(data.get("config"), dict):
        raise SourceError("catalog file lacks model_id or config", where=where,
                          fix="Catalog entries are {model_id, aliases, source, published_params, config}")
    aliases = data.get("aliases") or []
    if not isinstance(aliases, list):
        aliases = []
    pub = data.get("published_params")
    return CatalogEntry(model_id=data["model_id"], aliases=tuple(str(a) for a in aliases),
                        source=str(data.get("source") or ""),
                        published_params=str(pub) if pub is not None else None,
                        config=data["config"], path=where)


def _files() -> list[Path]:
    folder = catalog_dir()
    try:
        return sorted(folder / n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return []


def get(model_id: str) -> CatalogEntry | None:
    """The entry for an id or alias (case-insensitive), or None."""
    if not model_id or "\x00" in model_id:
        return None
    want = file_name(model_id)
    direct = catalog_dir() / want
    try:
        found = "/" not in want and direct.is_file()
    except (OSError, ValueError):                            # e.g. a name too long for the OS
        return None
    if found:
        return load_entry(direct)
    files = _files()
    for path in files:
        if path.name.lower() == want.lower():
            return load_entry(path)
    key = model_id.strip().lower()
    for path in files:                                      # NOTE: slow path, aliases only
        entry = load_entry(path)
        if key == entry.model_id.lower() or key in (a.lower() for a in entry.aliases):
            return entry
    return None


def list_models() -> list[CatalogEntry]:
    """Every catalog entry, sorted by id."""
    return sorted((load_entry(p) for p in _files()), key=lambda e: e.model_id.lower())


def search(text: str) -> list[CatalogEntry]:
    """Entries whose id or aliases contain every word of `text` (case-insensitive)."""
    words = text.lower().split()
    out = []
    for entry in list_models():
        hay = " ".join((entry.model_id,) + entry.aliases).lower()
        if all(w in hay for w in words):
            out.append(entry)
    return out
