"""Shared test helpers."""
import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

# NOTE: no test, nor a command a test starts (they inherit the environment), writes into the
# user's own data dir (~/.local/share/vramguard): `vramguard run` records startups there, and
# a store there slows every later `vramguard plan` (it is read for calibrations).
_DATA_DIR = tempfile.mkdtemp(prefix="vramguard-tests-")
os.environ["VRAMGUARD_DATA_DIR"] = _DATA_DIR
atexit.register(shutil.rmtree, _DATA_DIR, ignore_errors=True)
