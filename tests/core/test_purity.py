"""The core is pure: standard library only, nothing from above it, no I/O modules."""
import ast
import sys
from pathlib import Path

import vramguard.core

CORE = Path(vramguard.core.__file__).parent
IO_MODULES = {"subprocess", "socket", "urllib", "http", "sqlite3", "shutil", "pathlib", "os"}


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.level, node.module or ""


def test_core_imports_only_stdlib_and_itself():
    bad = []
    for path in sorted(CORE.glob("*.py")):
        for level, name in _imports(path):
            top = name.split(".")[0]
            if level >= 2:
                bad.append(f"{path.name}: imports from above the core ({'.' * level}{name})")
            elif level == 0 and top not in sys.stdlib_module_names:
                bad.append(f"{path.name}: third-party import {name}")
            elif level == 0 and top in IO_MODULES:
                bad.append(f"{path.name}: I/O module {name}")
    assert not bad, "\n".join(bad)
