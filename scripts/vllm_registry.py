#!/usr/bin/env python3
"""Regenerate src/vramguard/core/arch_registry.py and quant_registry.py from vLLM's released
sources: which releases implement each model architecture natively (the model registry) and
which replicate its multimodal encoder per TP rank on request, and the minimum GPU compute
capability of each quantization method by release.

Input: a folder with one sub-folder per release, named by its version (e.g. `0.8.5`,
`0.10.1.1`), holding that release's `vllm/model_executor/models/registry.py` (0.6.3+) or
`vllm/model_executor/models/__init__.py` (older), and its
`vllm/model_executor/layers/quantization/` files, anywhere below it, e.g. extracted from the
release's sdist on PyPI:

    tar -xzf vllm-0.8.5.tar.gz -C releases/0.8.5 --wildcards '*/models/registry.py' \
        '*/models/__init__.py' '*/layers/quantization/*.py' '*/layers/quantization/*/*.py'

The registry's architecture tables are the module-level dicts whose names end in `_MODELS`
and whose values are `(module, class)` tuples; ROCm and out-of-tree tables, and the
"previously supported" / plugin tables (plain strings), are not native implementations.
Sub-releases (0.10.1 and 0.10.1.1, 0.6.3 and 0.6.3.post1) are merged into one x.y.z entry:
an architecture in any of them counts.

Quantization: the method names are the keys of the release's name -> config class table
(`QUANTIZATION_METHODS` / `method_to_config` in `layers/quantization/__init__.py`); a method's
minimum capability is what its config class's `get_min_capability` returns (inherited from a
base class when not overridden; only integer constants are kept), and its name in vLLM's
message is the class's `get_name()`. Releases without quantization files are skipped there.
The names a release accepts are its `QuantizationMethods` Literal (the table's keys before
0.8.5); its deprecated ones are `DEPRECATED_QUANTIZATION_METHODS` (0.14+); the names an
override may claim are the strings in its classes' `override_quantization_method`; the names
ROCm accepts are the ROCm platform's `supported_quantization` (`platforms/rocm.py`, 0.6.5+),
before that `rocm_supported_quantization` in `vllm/config.py` (extract those files too).

Encoder TP data (`ENCODER_TP_DATA` in arch_registry.py): with the release's model files
(`'*/model_executor/models/*'`), the registry's architectures whose class sets
`supports_encoder_tp_data = True` (or inherits it from a class in those files), and before
that attribute (0.9.1-0.10.1) the classes that read `enable_multimodal_encoder_data_parallel`.
Releases without model files are not examined for it.

Usage:
    python scripts/vllm_registry.py RELEASES_DIR [--write-dir src/vramguard/core]
Standard library only.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from pathlib import Path

_SKIP_TABLES = ("ROCM", "OOT", "UNSUPPORTED", "PREVIOUSLY")


def release_key(name: str) -> tuple[int, int, int]:
    """'0.10.1.1' / '0.6.3.post1' -> (0, 10, 1)."""
    nums = [int(p) for p in re.findall(r"\d+", name.split("post")[0])][:3]
    return tuple(nums + [0] * (3 - len(nums)))  # type: ignore[return-value]


def registry_archs(folder: Path) -> set[str]:
    """The natively implemented architecture names in one release's source tree."""
    found: set[str] = set()
    for root, _, files in os.walk(folder):
        if not root.replace(os.sep, "/").endswith("model_executor/models"):
            continue
        for name in ("registry.py", "__init__.py"):
            if name in files:
                found |= _tables(Path(root, name).read_text(encoding="utf-8"))
    return found


def _models_dir(folder: Path) -> Path | None:
    for root, _, files in os.walk(folder):
        if root.replace(os.sep, "/").endswith("model_executor/models") and "registry.py" in files:
            return Path(root)
    return None


def _model_classes(models: Path) -> dict[tuple[str, str], tuple[list[str], bool | None, bool]]:
    """(module, class) -> (base names, its `supports_encoder_tp_data` if it sets one, whether
    its body reads `enable_multimodal_encoder_data_parallel`)."""
    out = {}
    for f in sorted(models.glob("*.py")):
        src = f.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                     for b in node.bases]
            flag = None
            for name, value in _assignments(node.body):
                if name == "supports_encoder_tp_data" and isinstance(value, ast.Constant):
                    flag = bool(value.value)
            body = ast.get_source_segment(src, node) or ""
            out[(f.stem, node.name)] = (bases, flag, "enable_multimodal_encoder_data_parallel"
                                        in body)
    return out


def _class_key(classes: dict, module: str, name: str):
    if (module, name) in classes:
        return (module, name)
    return next((k for k in classes if k[1] == name), None)


def _encoder_tp_data(classes: dict, key, seen: tuple = ()) -> bool:
    if key is None or key in seen:
        return False
    bases, flag, reads = classes[key]
    if flag is not None:
        return flag
    return reads or any(_encoder_tp_data(classes, _class_key(classes, key[0], b), seen + (key,))
                        for b in bases)


def encoder_tp_data_archs(folder: Path) -> set[str] | None:
    """The architectures whose model class replicates its multimodal encoder on every TP rank
    with `--mm-encoder-tp-mode data` (`supports_encoder_tp_data`, inherited; before it, the
    classes that read `--enable-multimodal-encoder-data-parallel`). None: no model files."""
    models = _models_dir(folder)
    if models is None or all(f.name in ("registry.py", "__init__.py")
                             for f in models.glob("*.py")):
        return None
    classes = _model_classes(models)
    entries = _table_entries((models / "registry.py").read_text(encoding="utf-8"))
    return {arch for arch, where in entries.items()
            if where is not None and _encoder_tp_data(classes, _class_key(classes, *where))}


def _assignments(nodes):
    """(name, value) of each single-name assignment (`x = ...`, `x: T = ...`) among `nodes`."""
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            yield target.id, value


def _table_entries(source: str) -> dict[str, tuple[str, str] | None]:
    """architecture -> (module, class) of the registry's native tables (None where the tuple
    is not two string constants)."""
    out: dict[str, tuple[str, str] | None] = {}
    for name, value in _assignments(ast.parse(source).body):
        if not (name.endswith("_MODELS") and isinstance(value, ast.Dict)
                and not any(s in name for s in _SKIP_TABLES)):
            continue
        for k, v in zip(value.keys, value.values):
            if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple):
                names = [e.value for e in v.elts if isinstance(e, ast.Constant)
                         and isinstance(e.value, str)]
                out[k.value] = (names[0], names[1]) if len(names) == len(v.elts) == 2 else None
    return out


def _tables(source: str) -> set[str]:
    return set(_table_entries(source))


def _returned(fn: ast.FunctionDef) -> ast.expr | None:
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and node.value is not None:
            return node.value
    return None


def _quant_modules(folder: Path):
    """The parsed modules of a release's layers/quantization package, in path order (files
    that do not parse are skipped)."""
    for path in sorted(folder.rglob("*.py")):
        if "layers/quantization" not in path.as_posix():
            continue
        try:
            yield ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue


def _quant_classes(folder: Path) -> dict[str, tuple]:
    """Class name -> (get_name() text, get_min_capability() int, base class names)."""
    info: dict[str, tuple] = {}
    for tree in _quant_modules(folder):
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            fns = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
            name = _returned(fns["get_name"]) if "get_name" in fns else None
            cap = _returned(fns["get_min_capability"]) if "get_min_capability" in fns else None
            info[cls.name] = (
                name.value if isinstance(name, ast.Constant) else None,
                cap.value if isinstance(cap, ast.Constant) and type(cap.value) is int else
                ("?" if cap is not None else None),
                [b.id for b in cls.bases if isinstance(b, ast.Name)])
    return info


def _inherited(info: dict[str, tuple], cls: str, field: int):
    seen: set[str] = set()
    while cls in info and cls not in seen:
        seen.add(cls)
        if info[cls][field] is not None:
            return info[cls][field]
        cls = info[cls][2][0] if info[cls][2] else ""
    return None


def _method_table(folder: Path) -> dict[str, str]:
    """The largest str -> class-name dict literal in `layers/quantization/__init__.py`."""
    best: dict[str, str] = {}
    for path in folder.rglob("__init__.py"):
        if not path.parent.as_posix().endswith("layers/quantization"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Dict) and node.keys
                    and all(isinstance(k, ast.Constant) for k in node.keys)
                    and all(isinstance(v, ast.Name) for v in node.values)):
                table = {k.value: v.id for k, v in zip(node.keys, node.values)}
                best = table if len(table) > len(best) else best
    return best


def quant_capabilities(folder: Path) -> dict[str, tuple[int, str]] | None:
    """Method -> (minimum capability, the name vLLM reports) for one release; None when the
    release's quantization files are not there."""
    table = _method_table(folder)
    if not table:
        return None
    info = _quant_classes(folder)
    out = {}
    for method, cls in table.items():
        cap, name = _inherited(info, cls, 1), _inherited(info, cls, 0)
        if type(cap) is int and cap > 0 and isinstance(name, str):
            out[method] = (cap, name)
    return out


def _quant_init(folder: Path) -> ast.Module | None:
    for path in folder.rglob("__init__.py"):
        if path.parent.as_posix().endswith("layers/quantization"):
            return ast.parse(path.read_text(encoding="utf-8"))
    return None


def _assigned(tree: ast.Module, name: str) -> ast.expr | None:
    return next((value for found, value in _assignments(tree.body) if found == name), None)


def _strings(node: ast.AST | None) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)] if node is not None else []


def quant_methods(folder: Path) -> tuple[list[str], list[str], set[str]] | None:
    """(the names vLLM accepts, in its order: `QuantizationMethods`'s Literal, else the keys of
    the name -> config table; the deprecated ones, which need --allow-deprecated-quantization;
    the strings the `override_quantization_method`s compare a checkpoint's method with) for
    one release; None without its quantization files."""
    tree = _quant_init(folder)
    if tree is None:
        return None
    literal = _assigned(tree, "QuantizationMethods")
    names = _strings(literal) if literal is not None else list(_method_table(folder))
    deprecated = _strings(_assigned(tree, "DEPRECATED_QUANTIZATION_METHODS"))
    claimed: set[str] = set()
    for mod in _quant_modules(folder):
        for fn in ast.walk(mod):
            if isinstance(fn, ast.FunctionDef) and fn.name == "override_quantization_method":
                claimed.update(_strings(fn))
    return names, deprecated, claimed


def rocm_methods(folder: Path) -> set[str] | None:
    """The methods ROCm accepts in one release: `supported_quantization` of the ROCm platform
    (`platforms/rocm.py`, 0.6.5+), else `rocm_supported_quantization` in `config.py`; None when
    neither file is there."""
    for rel, name in (("platforms/rocm.py", "supported_quantization"),
                      ("vllm/config.py", "rocm_supported_quantization")):
        for path in folder.rglob(Path(rel).name):
            if not path.as_posix().endswith(rel):
                continue
            nodes = ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            for found, value in _assignments(nodes):
                if found == name and isinstance(value, (ast.List, ast.Tuple)):
                    return set(_strings(value))
    return None


def spans(present: list[bool], releases: list[str]) -> str:
    """'0.4.1-' (from 0.4.1 on), '0.6.2-0.10.2' (last release with it), comma-separated."""
    out, start = [], None
    for i, here in enumerate(present + [False]):
        if here and start is None:
            start = i
        elif not here and start is not None:
            last = "" if i == len(releases) else releases[i - 1]
            out.append(f"{releases[start]}-{last}")
            start = None
    return ",".join(out)


def _span_table(by_release: dict[tuple[int, int, int], set[str]]) -> tuple[list[str], str]:
    releases = [".".join(map(str, k)) for k in sorted(by_release)]
    sets = [by_release[k] for k in sorted(by_release)]
    names = sorted(set().union(*sets))
    return releases, "\n".join(f'    "{a}": "{spans([a in s for s in sets], releases)}",'
                               for a in names)


def render(by_release: dict[tuple[int, int, int], set[str]],
           encoder: dict[tuple[int, int, int], set[str]]) -> str:
    """arch_registry.py."""
    releases, lines = _span_table(by_release)
    enc_releases, enc_lines = _span_table(encoder)
    return (_HEADER + "EXAMINED: tuple[str, ...] = (\n"
            + _wrap([f'"{r}"' for r in releases]) + ")\n\n"
            + "# architecture -> the examined releases whose registry implements it: "
              "'A-' from A on,\n# 'A-B' from A to B (the last one with it), comma-separated.\n"
            + "NATIVE: dict[str, str] = {\n" + lines + "\n}\n\n"
            + "# The releases whose model files were read for ENCODER_TP_DATA.\n"
            + "ENCODER_EXAMINED: tuple[str, ...] = (\n"
            + _wrap([f'"{r}"' for r in enc_releases]) + ")\n\n"
            + "# architecture -> the releases whose model class replicates its multimodal "
              "encoder on every\n# TP rank with --mm-encoder-tp-mode data "
              "(`supports_encoder_tp_data`, inherited; before\n# 0.10.2 the classes that read "
              "--enable-multimodal-encoder-data-parallel), as NATIVE.\n"
            + "ENCODER_TP_DATA: dict[str, str] = {\n" + enc_lines + "\n}\n")


def render_quant(by_release: dict[tuple[int, int, int], dict],
                 methods: dict[tuple[int, int, int], tuple[set, set, set, set]]) -> str:
    """quant_registry.py: per method, the releases where its minimum capability or reported
    name changes ('-': no integer minimum from that release on); and per method, the releases
    that accept it, deprecate it, or may claim a checkpoint of it by an override."""
    keys = sorted(by_release)
    names = sorted(set().union(*(by_release[k] for k in keys)))
    lines = []
    for m in names:
        parts, last = [], None
        for k in keys:
            cur = by_release[k].get(m)
            if cur != last:
                v = ".".join(map(str, k))
                parts.append(f"{v}:{cur[0]}:{cur[1]}" if cur else f"{v}:-")
                last = cur
        lines.append(f'    "{m}": "{",".join(parts)}",')
    examined = [".".join(map(str, k)) for k in keys]
    if sorted(methods) != keys:
        raise SystemExit("the method lists and the capability tables cover different releases")
    accepted = set().union(*(methods[k][0] for k in keys))
    tables = []
    for i, (label, doc) in enumerate(_METHOD_TABLES):
        sets = [methods[k][i] & accepted for k in keys]
        rows = [f'    "{m}": "{spans([m in s for s in sets], examined)}",'
                for m in sorted(set().union(*sets))]
        tables.append(doc + f"{label}: dict[str, str] = {{\n" + "\n".join(rows) + "\n}\n")
    return (_QUANT_HEADER + "QUANT_EXAMINED: tuple[str, ...] = (\n" + _wrap(
        [f'"{r}"' for r in examined]) + ")\n\n"
        + "# method -> 'release:minimum capability:name in vLLM's message' from that release on\n"
        + "# ('release:-': none from there), comma-separated.\n"
        + "MIN_CAPABILITY: dict[str, str] = {\n" + "\n".join(lines) + "\n}\n\n"
        + "\n".join(tables))


_METHOD_TABLES = (
    ("METHODS", "# method -> the examined releases whose QUANTIZATION_METHODS has it ('A-' from A "
                "on, 'A-B'\n# from A to B, comma-separated): vLLM's ModelConfig refuses any "
                "other (\"Unknown\n# quantization method\").\n"),
    ("DEPRECATED", "# method -> the releases that list it in DEPRECATED_QUANTIZATION_METHODS: "
                   "refused\n# without --allow-deprecated-quantization.\n"),
    ("CLAIMED", "# method -> the releases where an `override_quantization_method` compares a "
                "checkpoint's\n# method with it (it may load as another method).\n"),
    ("ROCM", "# method -> the releases whose ROCm platform accepts it (`supported_quantization`;\n"
             "# `rocm_supported_quantization` before 0.6.5); any other is refused there.\n"),
)


def _wrap(items: list[str], width: int = 92) -> str:
    out, line = [], "   "
    for it in items:
        if len(line) + len(it) + 2 > width:
            out.append(line)
            line = "   "
        line += f" {it},"
    return "\n".join(out + [line]) + "\n"


_HEADER = '''"""Which vLLM releases implement each model architecture natively: the names in each
release's model registry (`vllm/model_executor/models/registry.py`, `__init__.py` before
0.6.3), as read from the released sources; and which replicate its multimodal encoder on
every TP rank with --mm-encoder-tp-mode data (its model class, from the release's model
files).

Generated by scripts/vllm_registry.py; do not edit by hand. Pure data (`core/arch_support.py`
reads it).
"""

'''
_QUANT_HEADER = '''"""The minimum GPU compute capability (major x 10 + minor) of each vLLM quantization method,
by release: what the method's config class returns from `get_min_capability()`, which vLLM
compares with the GPU's before loading ("The quantization method ... is not supported for the
current GPU"); and which releases accept, deprecate or may override each method; as read
from the released sources.

Generated by scripts/vllm_registry.py; do not edit by hand. Pure data (`core/arch_support.py`
reads it).
"""

'''


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("releases", type=Path)
    ap.add_argument("--write-dir", type=Path, default=None,
                    help="write arch_registry.py and quant_registry.py there")
    args = ap.parse_args(argv)
    archs: dict[tuple[int, int, int], set[str]] = {}
    encoder: dict[tuple[int, int, int], set[str]] = {}
    quant: dict[tuple[int, int, int], dict] = {}
    methods: dict[tuple[int, int, int], tuple[set, set, set, set]] = {}
    for sub in sorted(p for p in args.releases.iterdir() if p.is_dir()):
        found = registry_archs(sub)
        if not found:
            print(f"no registry under {sub}", file=sys.stderr)
            return 1
        key = release_key(sub.name)
        archs.setdefault(key, set()).update(found)
        enc = encoder_tp_data_archs(sub)
        if enc is not None:
            encoder.setdefault(key, set()).update(enc)
        caps = quant_capabilities(sub)
        if caps is not None:
            quant.setdefault(key, {}).update(caps)
        listed = quant_methods(sub)
        if listed is not None:
            acc = methods.setdefault(key, (set(), set(), set(), set()))
            for part, found_names in zip(acc, (*listed, rocm_methods(sub) or ())):
                part.update(found_names)
    texts = {"arch_registry.py": render(archs, encoder), "quant_registry.py": render_quant(quant, methods)}
    for name, text in texts.items():
        if args.write_dir:
            (args.write_dir / name).write_text(text, encoding="utf-8")
            print(f"wrote {args.write_dir / name}", file=sys.stderr)
        else:
            sys.stdout.write(f"# ---- {name}\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
