"""Build the fake libnvidia-ml.so.1 (fake_nvml.c) and describe machines for it.

    lib_dir = build(tmp_dir)                 # gcc -shared -fPIC ... -> tmp_dir/libnvidia-ml.so.1
    m = Machine([Gpu(free=70 * GIB), Gpu(free=2 * GIB, procs=[Proc(4242, 60 * GIB)])])
    m.write(config_path)                     # atomically; the library re-reads it on every call

Run vramguard with LD_LIBRARY_PATH=lib_dir and FAKE_NVML_CONFIG=config_path (and optionally
FAKE_NVML_LOG=log_path to see which NVML functions were called, one name per line).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fake_nvml.c"
GIB = 1 << 30
MIB = 1 << 20
H100_NAME = "NVIDIA H100 80GB HBM3"
H100_TOTAL = 81559 * MIB          # what NVML reports (nvidia-smi's MiB)
H100_RESERVED = 470 * MIB         # the driver's reservation (v2 memory info)


class BuildError(RuntimeError):
    pass


def build(dest: Path) -> Path:
    """Compile fake_nvml.c into dest/libnvidia-ml.so.1; returns dest."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise BuildError("gcc not found (scripts/setup-test-env installs it)")
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / "libnvidia-ml.so.1"
    proc = subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(out), str(SOURCE)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(proc.stderr)
    return dest


def build_or_skip(dest: Path) -> Path:
    """`build` for a pytest fixture: a failed build skips the test, but fails it under CI."""
    import pytest
    try:
        return build(dest)
    except BuildError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"cannot build the fake libnvidia-ml: {exc}")


@dataclass
class Proc:
    pid: int
    used: int | None          # None: NVML_VALUE_NOT_AVAILABLE


@dataclass
class Mig:
    uuid: str
    total: int
    free: int
    name: str = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    gi: int = 1
    ci: int = 0
    procs: list[Proc] = field(default_factory=list)


@dataclass
class Gpu:
    free: int
    uuid: str | None = None
    name: str = H100_NAME
    total: int = H100_TOTAL
    reserved: int = H100_RESERVED
    util: int = 0
    cc: str = "9.0"
    procs: list[Proc] = field(default_factory=list)
    migs: list[Mig] = field(default_factory=list)
    extra: dict[str, int] = field(default_factory=dict)   # lost=1, err_util=3, ...


@dataclass
class Machine:
    gpus: list[Gpu] = field(default_factory=list)
    init_rc: int = 0
    count_rc: int = 0
    driver: str = "550.54.15"

    def text(self) -> str:
        lines = [f"driver version={self.driver}"]
        if self.init_rc:
            lines.append(f"init rc={self.init_rc}")
        if self.count_rc:
            lines.append(f"count rc={self.count_rc}")
        for i, g in enumerate(self.gpus):
            uuid = g.uuid or f"GPU-{i:08d}-fake-0000-0000-{i:012d}"
            extra = " ".join(f"{k}={v}" for k, v in g.extra.items())
            mig = " mig=1" if g.migs else ""
            lines.append(f'gpu uuid={uuid} name="{g.name}" total={g.total} free={g.free} '
                         f"reserved={g.reserved} util={g.util} cc={g.cc}{mig} {extra}".rstrip())
            for p in g.procs:
                lines.append(f"proc gpu={i} pid={p.pid} used={'NA' if p.used is None else p.used}")
            for j, m in enumerate(g.migs):
                lines.append(f'mig gpu={i} uuid={m.uuid} name="{m.name}" total={m.total} '
                             f"free={m.free} gi={m.gi} ci={m.ci}")
                for p in m.procs:
                    lines.append(f"proc gpu={i} mig={j} pid={p.pid} "
                                 f"used={'NA' if p.used is None else p.used}")
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> None:
        """Write atomically (the library may be reading it right now)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.text())
        os.replace(tmp, path)
