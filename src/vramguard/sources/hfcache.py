"""Find a model in the local Hugging Face cache without importing huggingface_hub.

Layout: `<cache>/models--<org>--<name>/snapshots/<revision>/` with `refs/main` naming the
revision. Caches looked in, in order: $HF_HUB_CACHE, $HUGGINGFACE_HUB_CACHE, $HF_HOME/hub,
$XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dirs() -> list[Path]:
    """The hub cache folders to look in, most specific first, without duplicates."""
    env = os.environ
    candidates = [env.get("HF_HUB_CACHE"), env.get("HUGGINGFACE_HUB_CACHE")]
    if env.get("HF_HOME"):
        candidates.append(str(Path(env["HF_HOME"]) / "hub"))
    if env.get("XDG_CACHE_HOME"):
        candidates.append(str(Path(env["XDG_CACHE_HOME"]) / "huggingface" / "hub"))
    try:
        candidates.append(str(Path.home() / ".cache" / "huggingface" / "hub"))
    except (RuntimeError, KeyError):                         # no home directory
        pass
    out: list[Path] = []
    for c in candidates:
        if c:
            try:
                p = Path(c).expanduser()
            except RuntimeError:
                p = Path(c)
            if p not in out:
                out.append(p)
    return out


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def repo_folder_name(model_id: str) -> str:
    return "models--" + model_id.strip().strip("/").replace("/", "--")


def _has_model_files(folder: Path) -> bool:
    try:
        names = os.listdir(folder)
    except (OSError, ValueError):
        return False
    return "config.json" in names or any(n.endswith(".gguf") for n in names)


def _snapshot(repo: Path, revision: str | None) -> Path | None:
    snaps = repo / "snapshots"
    wanted = revision
    if wanted is None:
        try:
            wanted = (repo / "refs" / "main").read_text(encoding="utf-8").strip() or None
        except (OSError, ValueError):                       # incl. UnicodeDecodeError
            wanted = None
    if wanted and _has_model_files(snaps / wanted):
        return snaps / wanted
    try:
        revs = [snaps / n for n in os.listdir(snaps)]
    except (OSError, ValueError):
        return None
    revs = [r for r in revs if _has_model_files(r)]
    if not revs:
        return None

    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0
    return max(revs, key=mtime)                              # newest snapshot with a config


def find_snapshot(model_id: str, revision: str | None = None) -> Path | None:
    """The snapshot folder of `model_id` in a local HF cache, or None. Case-insensitive."""
    if not model_id or "\x00" in model_id or model_id.count("/") > 1:
        return None
    want = repo_folder_name(model_id)
    if len(want.encode("utf-8", "surrogatepass")) > 255:     # no file system allows that name
        return None
    for cache in cache_dirs():
        repo = cache / want
        if not _is_dir(repo):
            try:
                match = [n for n in os.listdir(cache) if n.lower() == want.lower()]
            except (OSError, ValueError):
                continue
            if not match:
                continue
            repo = cache / match[0]
        snap = _snapshot(repo, revision)
        if snap is not None:
            return snap
    return None
