"""Host checks (probe/host.py) over fake /proc and /sys trees."""

from __future__ import annotations

import os
from pathlib import Path

from vramguard.core.settings import Settings
from vramguard.probe.host import (HostState, check_host, host_need, read_cgroup, read_host)

GIB = 1 << 30
MIB = 1 << 20


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def fake_statvfs(total: int):
    def statvfs(path: str):
        return os.statvfs_result((4096, 4096, total // 4096, total // 4096, total // 4096,
                                  0, 0, 0, 0, 255))
    return statvfs


def test_cgroup_v2_in_a_container(tmp_path):
    root = tree(tmp_path, {"proc/self/cgroup": "0::/\n",
                           "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
                           "sys/fs/cgroup/memory.max": f"{32 * GIB}\n",
                           "sys/fs/cgroup/memory.current": f"{GIB}\n"})
    assert read_cgroup(root) == (2, 32 * GIB, GIB)


def test_cgroup_v2_nested_path_and_unlimited(tmp_path):
    root = tree(tmp_path, {"proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
                           "sys/fs/cgroup/cgroup.controllers": "memory\n",
                           "sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n"})
    assert read_cgroup(root) == (2, None, None)


def test_cgroup_v1_limit_and_unlimited(tmp_path):
    root = tree(tmp_path, {"proc/self/cgroup": "12:memory:/docker/abc\n5:cpu:/docker/abc\n",
                           "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": f"{16 * GIB}",
                           "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": f"{GIB}"})
    assert read_cgroup(root) == (1, 16 * GIB, GIB)
    tree(tmp_path, {"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes":
                    "9223372036854771712"})
    assert read_cgroup(root)[1] is None


def test_no_cgroup_files(tmp_path):
    assert read_cgroup(tmp_path) == (None, None, None)


def test_read_host_with_docker_default_shm(tmp_path):
    root = tree(tmp_path, {"proc/self/cgroup": "0::/\n",
                           "sys/fs/cgroup/cgroup.controllers": "memory\n",
                           "sys/fs/cgroup/memory.max": f"{8 * GIB}\n"})
    h = read_host(root, statvfs=fake_statvfs(64 * MIB), memory=lambda: (64 * GIB, 60 * GIB))
    assert h.shm_total_bytes == 64 * MIB
    assert h.cgroup_limit_bytes == 8 * GIB
    assert h.ram_available_bytes == 60 * GIB


def test_read_host_without_dev_shm(tmp_path):
    def missing(path):
        raise FileNotFoundError(path)
    h = read_host(tmp_path, statvfs=missing, memory=lambda: (1, 1))
    assert h.shm_total_bytes is None and "/dev/shm is missing" in h.notes


def test_need_terms():
    need = host_need(Settings(tensor_parallel_size=2, cpu_offload_gb=10, swap_space=4), None)
    assert need.terms["cpu_offload"] == 20 * GIB           # per GPU
    assert need.terms["swap_space"] == 8 * GIB
    assert need.terms["vllm_processes"] == 2 * GIB + 2 * 2 * GIB
    assert need.shm_bytes == GIB
    v0 = host_need(Settings(), None, engine="v0")
    assert v0.terms["swap_space"] == 4 * GIB               # v0 default swap space
    assert host_need(Settings(), None).shm_bytes == 0        # one GPU: no NCCL


def test_shm_too_small_for_tp():
    need = host_need(Settings(tensor_parallel_size=2), None)
    probs = check_host(HostState(ram_available_bytes=500 * GIB, shm_total_bytes=64 * MIB), need)
    assert [p.kind for p in probs] == ["shm_too_small"]
    assert "--ipc=host" in probs[0].fix and "--shm-size" in probs[0].fix
    assert "64 MiB" in probs[0].message


def test_kv_offloading_buffer_on_the_host():
    """--kv-offloading-size (native backend): host memory in total over the TP ranks; from
    vLLM 0.20 one file in /dev/shm, which a 200 GiB /dev/shm cannot hold at 400 GiB (vLLM:
    "Insufficient space in /dev/shm: 409594 MiB required, 204800 MiB free"). LMCache keeps
    its own server's memory."""
    s = Settings(tensor_parallel_size=4, kv_offloading_size=400)
    new, old = host_need(s, None, offload_in_shm=True), host_need(s, None)
    assert new.terms["kv_offloading"] == old.terms["kv_offloading"] == 400 * GIB
    assert (new.shm_bytes, old.shm_bytes) == (GIB + 400 * GIB, GIB)
    assert (new.shm_offload_bytes, old.shm_offload_bytes) == (400 * GIB, 0)
    small = host_need(Settings(kv_offloading_size=0.5), None, offload_in_shm=True)
    probs = check_host(HostState(ram_available_bytes=4000 * GIB, shm_total_bytes=64 * MIB),
                       small)          # one GPU: the buffer is all /dev/shm holds
    assert "KV offloading buffer" in probs[0].message
    probs = check_host(HostState(ram_available_bytes=4000 * GIB, shm_total_bytes=200 * GIB), new)
    assert [p.kind for p in probs] == ["shm_too_small"]
    assert "Insufficient space in /dev/shm" in probs[0].message
    assert "--kv-offloading-size" in probs[0].fix
    assert check_host(HostState(ram_available_bytes=4000 * GIB, shm_total_bytes=200 * GIB),
                      old) == []
    lm = host_need(Settings(kv_offloading_size=400, kv_offloading_backend="lmcache"), None,
                   offload_in_shm=True)
    assert "kv_offloading" not in lm.terms and lm.shm_bytes == 0


def test_cgroup_limit_below_need():
    need = host_need(Settings(cpu_offload_gb=40), None)
    probs = check_host(HostState(ram_available_bytes=500 * GIB, cgroup_limit_bytes=16 * GIB),
                       need)
    assert [p.kind for p in probs] == ["cgroup_memory_limit"]
    assert "cpu offload 40.0 GiB" in probs[0].message
    assert "resources.limits.memory" in probs[0].fix


def test_host_ram_short_is_error_far_below_warning_near():
    need = host_need(Settings(), None)
    total = need.total_bytes
    far = check_host(HostState(ram_available_bytes=total // 2), need)
    near = check_host(HostState(ram_available_bytes=int(total * 0.9)), need)
    assert far[0].severity == "error" and near[0].severity == "warning"
    assert check_host(HostState(ram_available_bytes=total * 2), need) == []
