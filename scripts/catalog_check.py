#!/usr/bin/env python3
"""Validate the embedded model catalog (src/vramguard/data/catalog/models/*.json).

Each file is `<org>__<name>.json` holding exactly:
    {"model_id", "aliases", "source", "published_params", "config"}
where `config` is a published Hugging Face config.json, verbatim.

Checks: valid JSON; exactly the required keys with the right types; model_id matches the
file name; config has `model_type` or `architectures`; aliases look like HF ids; no id or
alias is used twice; published_params looks like "8.03B" / "125M" / "~31B" or is null.

Usage:
    python scripts/catalog_check.py              # validate, print counts; exit 1 on errors
    python scripts/catalog_check.py --markdown   # also print the docs/catalog.md table
    python scripts/catalog_check.py --markdown --write docs/catalog.md
Standard library only.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATALOG_DIR = ROOT / "src" / "vramguard" / "data" / "catalog" / "models"
REQUIRED = ("model_id", "aliases", "source", "published_params", "config")
HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
PARAMS = re.compile(r"^~?\d+(\.\d+)?[KMBT]$")
CORPUS_SOURCE = re.compile(r"^vramguard shared corpus \(verified: (yes|no)\)$")


def file_name_for(model_id: str) -> str:
    """`org/name` -> `org__name.json`."""
    return model_id.replace("/", "__", 1) + ".json"


def model_type_of(config: dict) -> str:
    """The model_type, or the first architecture when model_type is absent."""
    if isinstance(config.get("model_type"), str):
        return config["model_type"]
    arch = config.get("architectures") or ["?"]
    return f"({arch[0]})"


def verified_of(source: str) -> str:
    """Verification status as recorded in `source`.

    Corpus entries carry the shared corpus INDEX status; entries copied from a public
    repository are `yes (copy)`.
    """
    m = CORPUS_SOURCE.match(source)
    return m.group(1) if m else "yes (copy)"


def origin_of(source: str) -> str:
    """`corpus` or `new` (found in a public repository copy)."""
    return "corpus" if CORPUS_SOURCE.match(source) else "new"


def check_file(path: Path) -> tuple[dict | None, list[str]]:
    """Return (entry, errors) for one catalog file."""
    errors: list[str] = []
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, [f"{path.name}: not valid JSON ({exc})"]
    if not isinstance(entry, dict):
        return None, [f"{path.name}: top level is not an object"]
    keys = set(entry)
    missing = [k for k in REQUIRED if k not in keys]
    extra = sorted(keys - set(REQUIRED))
    if missing:
        errors.append(f"{path.name}: missing keys {missing}")
    if extra:
        errors.append(f"{path.name}: unexpected keys {extra}")
    if missing:
        return None, errors
    mid, aliases, source, params, config = (entry[k] for k in REQUIRED)
    if not isinstance(mid, str) or not HF_ID.match(mid):
        errors.append(f"{path.name}: model_id {mid!r} is not an org/name id")
    elif file_name_for(mid) != path.name:
        errors.append(f"{path.name}: model_id {mid!r} expects file {file_name_for(mid)}")
    if not isinstance(aliases, list) or not all(isinstance(a, str) and HF_ID.match(a) for a in aliases):
        errors.append(f"{path.name}: aliases must be a list of org/name ids, got {aliases!r}")
    if not isinstance(source, str) or not source.strip():
        errors.append(f"{path.name}: source must be a non-empty string")
    if params is not None and not (isinstance(params, str) and PARAMS.match(params)):
        errors.append(f"{path.name}: published_params {params!r} is not like '8.03B' or null")
    if not isinstance(config, dict):
        errors.append(f"{path.name}: config is not an object")
    elif not isinstance(config.get("model_type"), str) and not isinstance(config.get("architectures"), list):
        errors.append(f"{path.name}: config has neither model_type nor architectures")
    return entry, errors


def check_all(directory: Path = CATALOG_DIR) -> tuple[list[dict], list[str]]:
    """Validate every file; also reject an id or alias used twice."""
    entries: list[dict] = []
    errors: list[str] = []
    files = sorted(directory.glob("*.json"))
    if not files:
        errors.append(f"no catalog files in {directory}")
    owner: dict[str, str] = {}
    for path in files:
        entry, errs = check_file(path)
        errors.extend(errs)
        if entry is None or errs:
            continue
        entries.append(entry)
        for name in [entry["model_id"], *entry["aliases"]]:
            key = name.lower()  # the Hub treats ids case-insensitively
            if key in owner:
                errors.append(f"{path.name}: id/alias {name!r} already used by {owner[key]}")
            else:
                owner[key] = path.name
    return entries, errors


def markdown_table(entries: list[dict]) -> str:
    """The docs/catalog.md content."""
    lines = [
        "# Embedded model catalog",
        "",
        "Generated by `python scripts/catalog_check.py --markdown --write docs/catalog.md`; do not edit by hand.",
        "",
        "Each entry in `src/vramguard/data/catalog/models/` is a published Hugging Face `config.json`, kept verbatim,",
        "with where it came from. `verified` is the shared corpus INDEX status for corpus entries",
        "(`no` = partial or reconstructed); `yes (copy)` means the config was taken from a public",
        "repository copy of the published file (see `source`).",
        "",
        f"{len(entries)} models.",
        "",
        "| model id | model_type | params | source | verified |",
        "|---|---|---|---|---|",
    ]
    for e in sorted(entries, key=lambda e: e["model_id"].lower()):
        src = e["source"].replace("|", "\\|")
        ids = e["model_id"] + "".join(f"<br>alias: {a}" for a in e["aliases"])
        lines.append(
            f"| {ids} | {model_type_of(e['config'])} | {e['published_params'] or '-'} | {src} | {verified_of(e['source'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the catalog table as Markdown")
    parser.add_argument("--write", metavar="PATH", help="with --markdown: write the table to PATH instead")
    parser.add_argument("--dir", default=str(CATALOG_DIR), help="catalog directory (default: the package's)")
    args = parser.parse_args(argv)

    entries, errors = check_all(Path(args.dir))
    for err in errors:
        print(f"ERROR {err}", file=sys.stderr)
    origins = [origin_of(e["source"]) for e in entries]
    verified = [verified_of(e["source"]) for e in entries]
    types = {model_type_of(e["config"]) for e in entries}
    summary = (
        f"catalog: {len(entries)} valid files, {len(errors)} errors; "
        f"{origins.count('corpus')} from the shared corpus "
        f"({sum(1 for o, v in zip(origins, verified) if o == 'corpus' and v == 'yes')} verified, "
        f"{sum(1 for o, v in zip(origins, verified) if o == 'corpus' and v == 'no')} not), "
        f"{origins.count('new')} from public repository copies; "
        f"{sum(len(e['aliases']) for e in entries)} aliases; "
        f"{sum(1 for e in entries if e['published_params'])} with published_params; "
        f"{len(types)} model types"
    )
    if args.markdown:
        table = markdown_table(entries)
        if args.write:
            Path(args.write).write_text(table, encoding="utf-8")
            print(f"wrote {args.write}", file=sys.stderr)
        else:
            sys.stdout.write(table)
        print(summary, file=sys.stderr)
    else:
        print(summary)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
