"""Integration: the real `vramguard` CLI and the real nvidia-ml-py (pynvml) code path against
a fake libnvidia-ml.so.1 compiled from tests/fake_nvml/fake_nvml.c (LD_LIBRARY_PATH)."""

from __future__ import annotations

import ctypes.util
import json
import os
import stat
import time

import pytest

from fake_nvml.machine import GIB, Gpu, Machine, Mig, Proc

pytestmark = pytest.mark.integration
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CHECK = ("check", "--offline", "--no-host", "--vllm-version", "0.33.0")
BUSY_PID = 4_000_001          # a host PID that does not exist in this PID namespace


def two_cards() -> Machine:
    return Machine([Gpu(free=78 * GIB), Gpu(free=3 * GIB, util=97,
                                            procs=[Proc(BUSY_PID, 75 * GIB)])])


def test_two_cards_one_nearly_full(fake_host):
    fake_host.set(two_cards())
    one = fake_host.run(*CHECK, "--json", MODEL, "--max-model-len", "8192")
    assert one.returncode == 0, one.stderr
    d = json.loads(one.stdout)
    assert d["ok"] and [g["selected"] for g in d["gpus"]] == [True, False]
    assert d["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert d["gpus"][0]["total_bytes"] == round(79.19 * GIB)        # the catalog's CUDA total

    two = fake_host.run(*CHECK, "--json", "--", "vllm", "serve", MODEL, "-tp", "2",
                        "--max-model-len", "8192")
    assert two.returncode == 1, two.stderr
    d = json.loads(two.stdout)
    assert d["tightest_index"] == 1
    assert d["gpus"][1]["free_bytes"] == 3 * GIB
    assert d["gpus"][1]["processes"] == [{"pid": BUSY_PID, "name": None,
                                          "used_bytes": 75 * GIB}]
    assert any("not in this PID namespace" in n for n in d["gpus"][1]["notes"])
    p = d["problems"][0]
    assert p["kind"] == "free_memory_below_request" and f"PID {BUSY_PID}" in p["fix"]
    assert "Free memory on device cuda:1" in p["message"]


def test_text_verdict_and_single_init(fake_host):
    fake_host.set(two_cards())
    r = fake_host.run(*CHECK, MODEL, "-tp", "2", "--max-model-len", "8192")
    assert r.returncode == 1
    assert "UNSAFE to launch: GPU 1 decides" in r.stdout
    assert len(fake_host.calls("nvmlInitWithFlags")) == 1


def wait_for_calls(host, name, n, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    while len(host.calls(name)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the window did not sample"
        time.sleep(0.01)


def test_process_appearing_mid_window(fake_host):
    idle = Machine([Gpu(free=78 * GIB)])
    busy = Machine([Gpu(free=30 * GIB, procs=[Proc(os.getpid(), 48 * GIB)])])
    fake_host.set(idle)
    proc = fake_host.popen(*CHECK, "--json", "--window", "4s", "--interval", "0.1s", MODEL,
                           "--max-model-len", "8192")
    mem = "nvmlDeviceGetMemoryInfo_v2"
    wait_for_calls(fake_host, mem, 3, proc)
    fake_host.set(busy)
    wait_for_calls(fake_host, mem, len(fake_host.calls(mem)) + 4, proc)
    fake_host.set(idle)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err          # the lowest free memory seen decides
    d = json.loads(out)
    g = d["gpus"][0]
    assert g["free_min_bytes"] == 30 * GIB and g["free_max_bytes"] == 78 * GIB
    assert g["free_bytes"] == 30 * GIB
    events = [(e["kind"], e["pid"]) for e in d["window"]["events"]]
    assert events == [("appeared", os.getpid()), ("left", os.getpid())]
    assert d["window"]["samples"] >= 30
    assert d["window"]["events"][0]["name"]                # our own PID: psutil has its name
    assert len(fake_host.calls("nvmlInitWithFlags")) == 1   # init once, handles reused
    assert len(fake_host.calls("nvmlDeviceGetHandleByIndex_v2")) == 1


def test_library_missing(fake_host, tmp_path):
    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("a real libnvidia-ml is installed on this machine")
    empty = tmp_path / "empty"
    empty.mkdir()
    r = fake_host.run(*CHECK, MODEL, LD_LIBRARY_PATH=str(empty))
    assert r.returncode == 2
    assert "no NVIDIA driver found: libnvidia-ml.so.1 could not be loaded" in r.stderr
    assert "--gpus all" in r.stderr and "vramguard plan" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_driver_not_loaded(fake_host):
    fake_host.set(Machine([Gpu(free=78 * GIB)], init_rc=9))
    r = fake_host.run(*CHECK, MODEL)
    assert r.returncode == 2
    assert "the NVIDIA driver is not loaded" in r.stderr and "modprobe" in r.stderr


def test_no_permission(fake_host):
    fake_host.set(Machine([Gpu(free=78 * GIB)], init_rc=4))
    r = fake_host.run(*CHECK, MODEL)
    assert r.returncode == 2 and "no permission" in r.stderr


def test_gpu_lost(fake_host):
    fake_host.set(Machine([Gpu(free=78 * GIB), Gpu(free=78 * GIB, extra={"lost": 1})]))
    r = fake_host.run(*CHECK, MODEL)
    assert r.returncode == 2
    assert "GPU 1" in r.stderr and "fallen off the bus" in r.stderr and "Xid" in r.stderr


def test_not_supported_fields_are_unknown(fake_host):
    fake_host.set(Machine([Gpu(free=78 * GIB, extra={"err_util": 3, "err_cc": 3,
                                                     "err_memory_v2": 3, "err_procs": 3})]))
    r = fake_host.run(*CHECK, "--json", MODEL, "--max-model-len", "8192")
    assert r.returncode == 0, r.stderr
    g = json.loads(r.stdout)["gpus"][0]
    assert g["utilization_pct"] is None and g["processes"] == []
    assert g["free_bytes"] == 78 * GIB                   # from the v1 memory call


def test_mig_instances_and_cuda_visible_devices(fake_host):
    migs = [Mig("MIG-aaaa-1111", total=40 * GIB, free=39 * GIB, gi=1),
            Mig("MIG-bbbb-2222", total=40 * GIB, free=4 * GIB, gi=2,
                procs=[Proc(BUSY_PID, 35 * GIB)])]
    fake_host.set(Machine([Gpu(free=78 * GIB, name="NVIDIA A100-SXM4-80GB",
                               total=81920 << 20, cc="8.0", migs=migs)]))
    r = fake_host.run(*CHECK, "--json", MODEL, "--max-model-len", "4096",
                      CUDA_VISIBLE_DEVICES="MIG-bbbb-2222")
    d = json.loads(r.stdout)
    assert r.returncode == 1, r.stderr
    assert [g["uuid"] for g in d["gpus"]] == ["MIG-bbbb-2222"]
    assert d["gpus"][0]["total_bytes"] == 40 * GIB
    r = fake_host.run(*CHECK, "--json", MODEL, "--max-model-len", "4096",
                      CUDA_VISIBLE_DEVICES="MIG-aaaa")
    assert r.returncode == 0, r.stdout + r.stderr


def test_malformed_cuda_visible_devices(fake_host):
    fake_host.set(two_cards())
    r = fake_host.run(*CHECK, MODEL, CUDA_VISIBLE_DEVICES="0,zero")
    assert r.returncode == 2 and "CUDA_VISIBLE_DEVICES" in r.stderr


# ---- vramguard run, end to end --------------------------------------------------------
@pytest.fixture
def stub_vllm(fake_host):
    """A `vllm` on PATH that prints its PID and argv, then exits 3."""
    bin_dir = fake_host.tmp / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "vllm"
    stub.write_text('#!/bin/sh\necho "stub-pid $$"\necho "stub-argv $*"\nexit 3\n')
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


RUN = ("run", "--offline", "--vllm-version", "0.33.0", "--no-host")


def test_run_execs_vllm_and_passes_its_exit_code(fake_host, stub_vllm):
    fake_host.set(two_cards())
    proc = fake_host.popen(*RUN, "--", "vllm", "serve", MODEL, "--max-model-len", "8192",
                           **stub_vllm)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert f"stub-pid {proc.pid}" in out               # exec'd: same process, no child
    assert f"stub-argv serve {MODEL} --max-model-len 8192" in out
    assert fake_host.calls()[-1] == "nvmlShutdown"     # NVML closed before the exec


def test_run_refuses_unsafe_and_probe_failure(fake_host, stub_vllm):
    fake_host.set(two_cards())
    r = fake_host.run(*RUN, "--", "vllm", "serve", MODEL, "-tp", "2", **stub_vllm)
    assert r.returncode == 1 and "stub-argv" not in r.stdout
    fake_host.set(Machine([Gpu(free=78 * GIB)], init_rc=9))
    r = fake_host.run(*RUN, "--", "vllm", "serve", MODEL, **stub_vllm)
    assert r.returncode == 2 and "stub-argv" not in r.stdout
    assert "driver is not loaded" in r.stderr
    r = fake_host.run(*RUN, "--force", "--", "vllm", "serve", MODEL, **stub_vllm)
    assert r.returncode == 3 and "stub-argv serve" in r.stdout
    assert "WARNING: --force" in r.stderr


def test_run_adjust_end_to_end(fake_host, stub_vllm):
    fake_host.set(Machine([Gpu(free=40 * GIB, procs=[Proc(BUSY_PID, 38 * GIB)])]))
    r = fake_host.run(*RUN, "--adjust", "--", "vllm", "serve", MODEL, "--max-model-len", "8192",
                      **stub_vllm)
    assert r.returncode == 3, r.stderr
    assert "--adjust: --gpu-memory-utilization 0.92 ->" in r.stderr
    assert "--gpu-memory-utilization 0.4" in r.stdout


def test_run_missing_vllm_is_exit_2(fake_host, tmp_path):
    fake_host.set(two_cards())
    missing = str(tmp_path / "nowhere" / "vllm")
    r = fake_host.run(*RUN, "--", missing, "serve", MODEL, "--max-model-len", "8192")
    assert r.returncode == 2 and "command not found" in r.stderr


def test_gpu_lost_outside_cuda_visible_devices_is_a_note(fake_host):
    fake_host.set(Machine([Gpu(free=78 * GIB), Gpu(free=78 * GIB, extra={"lost": 1})]))
    r = fake_host.run(*CHECK, "--json", MODEL, "--max-model-len", "8192",
                      CUDA_VISIBLE_DEVICES="0")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert any("not used by this launch: GPU 1" in n for n in d["notes"])
    r = fake_host.run(*CHECK, MODEL, CUDA_VISIBLE_DEVICES="GPU-00000001")   # the lost one
    assert r.returncode == 2 and "fallen off the bus" in r.stderr


def test_peer_link_from_nvml_p2p_status(fake_host):
    """nvmlDeviceGetP2PStatus through the real pynvml: NVLink on every pair, peer access over
    PCIe, neither, or a driver error (unknown). TP 2 under 0.19: vLLM's custom all-reduce
    runs (and costs memory) unless the pair has no peer access."""
    argv = ("--json", "--vllm-version", "0.19.0", MODEL, "-tp", "2", "--max-model-len", "8192")
    got = {}
    for extra, want in (({"nvlink": 1}, "nvlink"), ({"p2p": 1}, "p2p"), ({}, "none"),
                        ({"nvlink": 1, "err_p2p": 3}, None)):
        fake_host.set(Machine([Gpu(free=78 * GIB, extra=dict(extra)),
                               Gpu(free=78 * GIB, extra=dict(extra))]))
        r = fake_host.run("check", "--offline", "--no-host", *argv)
        assert r.returncode == 0, r.stderr
        d = json.loads(r.stdout)
        notes = [n for n in d["notes"] if "peer link" in n]
        assert notes == ([] if want is None else [
            f"GPU peer link (NVML): {want}; vLLM's custom all-reduce is "
            f"{'off' if want == 'none' else 'on'} for TP 2"])
        got[want] = d["plan"]["per_gpu"]["non_torch_bytes"]
    assert got["nvlink"] == got["p2p"] == got[None] > got["none"]
    assert fake_host.calls("nvmlDeviceGetP2PStatus")
