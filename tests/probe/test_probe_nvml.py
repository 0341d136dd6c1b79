"""probe/nvml.py against a pure-Python fake of pynvml: fields, MIG, containers, errors."""

from __future__ import annotations

import pytest

from probe_fakes import GIB, MIB, FakePynvml, FDev
from vramguard.errors import ProbeError
from vramguard.probe.nvml import NvmlSession, gpu_spec_for


def session(devices, *, visible_pids=None, **kw) -> tuple[NvmlSession, FakePynvml]:
    lib = FakePynvml(devices, **kw)
    names = {1234: "python3", 99: "vllm"}

    def info(pid):
        if visible_pids is not None and pid not in visible_pids:
            return None, False
        return names.get(pid), True
    return NvmlSession(lib, process_info=info, host_memory=lambda: (128 * GIB, 100 * GIB)), lib


def test_reads_two_gpus_with_processes_and_catalog_spec():
    s, _ = session([FDev(uuid="GPU-a", free=78 * GIB),
                    FDev(uuid="GPU-b", free=3 * GIB, util=97, procs=[(1234, 72 * GIB)])])
    a, b = s.read()
    assert (a.index, a.uuid, a.free_bytes) == (0, "GPU-a", 78 * GIB)
    assert a.spec.name == "H100-80GB" and a.spec.source == "catalog"    # NVML name -> catalog
    assert b.utilization_pct == 97.0
    assert b.processes[0].pid == 1234 and b.processes[0].name == "python3"
    assert b.processes[0].used_bytes == 72 * GIB
    # used (v2) = total - reserved - free
    assert b.used_bytes == 81559 * MIB - 470 * MIB - 3 * GIB


def test_init_once_and_handles_reused():
    s, lib = session([FDev()])
    for _ in range(5):
        s.read()
    assert lib.calls.count("nvmlInit") == 1
    assert lib.calls.count("nvmlDeviceGetHandleByIndex") == 1
    assert lib.calls.count("name") == 1          # static facts read once per handle


def test_read_selected_indices_only():
    s, _ = session([FDev(uuid="GPU-a"), FDev(uuid="GPU-b"), FDev(uuid="GPU-c")])
    assert [g.uuid for g in s.read([2, 0])] == ["GPU-c", "GPU-a"]
    with pytest.raises(ProbeError, match="no GPU 5"):
        s.read([5])


def test_not_supported_fields_are_none():
    s, _ = session([FDev(util=None, cc=None, errors={"procs": 3})])
    g, = s.read()
    assert g.utilization_pct is None
    assert g.processes == ()


def test_memory_v1_when_v2_not_supported():
    s, _ = session([FDev(memory_v2=False, free=10 * GIB)])
    g, = s.read()
    assert g.free_bytes == 10 * GIB
    # NVML's v1 total includes the reservation: not within 3% of the catalog? it is (0.6%)
    assert g.spec.name == "H100-80GB"


def test_unknown_gpu_gets_spec_from_nvml_total():
    s, _ = session([FDev(name="NVIDIA Future GPU 9000", total=50 * GIB, reserved=GIB,
                         free=40 * GIB, cc=(12, 0))])
    g, = s.read()
    assert g.spec.source == "nvml"
    assert g.spec.total_bytes == 49 * GIB            # total - driver reservation
    assert g.spec.compute_capability == (12, 0)


def test_catalog_name_with_other_total_is_not_trusted():
    spec = gpu_spec_for("NVIDIA A100-SXM4-80GB MIG 3g.40gb", 40 * GIB, (8, 0))
    assert spec.source == "nvml" and spec.total_bytes == 40 * GIB


def test_unified_memory_uses_host_ram():
    s, _ = session([FDev(name="NVIDIA GB10", errors={"memory": 3})])
    g, = s.read()
    assert g.free_bytes == 100 * GIB
    assert g.spec.uma
    assert any("unified memory" in n for n in g.notes)


def test_mig_instances_are_listed_as_devices():
    migs = [FDev(name="NVIDIA A100-SXM4-80GB MIG 3g.40gb", uuid="MIG-1", total=40 * GIB,
                 reserved=0, free=39 * GIB, util=None, gi_ci=(1, 0)),
            FDev(name="NVIDIA A100-SXM4-80GB MIG 3g.40gb", uuid="MIG-2", total=40 * GIB,
                 reserved=0, free=5 * GIB, util=None, gi_ci=(2, 0), procs=[(99, 34 * GIB)])]
    s, _ = session([FDev(uuid="GPU-0"), FDev(name="NVIDIA A100-SXM4-80GB", uuid="GPU-1",
                                             mig=migs)])
    out = s.read()
    assert [g.uuid for g in out] == ["GPU-0", "MIG-1", "MIG-2"]
    assert [g.index for g in out] == [0, 1, 1]
    assert out[2].processes[0].name == "vllm"
    assert "GPU instance 2" in out[2].notes[0]
    assert out[1].utilization_pct is None
    assert out[1].spec.total_bytes == 40 * GIB


def test_container_pids_are_noted():
    s, _ = session([FDev(procs=[(1234, 10 * GIB), (777777, 20 * GIB)], free=40 * GIB)],
                   visible_pids={1234})
    g, = s.read()
    hidden = [p for p in g.processes if p.pid == 777777][0]
    assert hidden.name is None and hidden.used_bytes == 20 * GIB
    assert any("PID 777777 not in this PID namespace" in n for n in g.notes)


def test_memory_not_listed_by_any_process_is_noted():
    s, _ = session([FDev(free=20 * GIB, procs=[])])
    g, = s.read()
    assert any("not accounted for" in n for n in g.notes)


def test_process_memory_not_available_is_none():
    s, _ = session([FDev(procs=[(1234, None)])])
    assert s.read()[0].processes[0].used_bytes is None


@pytest.mark.parametrize("code, text", [
    (12, "no NVIDIA driver found: libnvidia-ml.so.1 could not be loaded"),
    (9, "driver is not loaded"),
    (4, "no permission"),
    (18, "versions do not match"),
])
def test_init_errors_become_probe_errors(code, text):
    s, _ = session([FDev()], init_error=code)
    with pytest.raises(ProbeError) as exc:
        s.read()
    assert text in str(exc.value)
    assert exc.value.fix


def test_library_missing_message_names_the_fixes():
    s, _ = session([], init_error=12)
    with pytest.raises(ProbeError) as exc:
        s.read()
    assert "--gpus all" in exc.value.fix and "vramguard plan" in exc.value.fix


def test_gpu_lost_raises_and_names_the_gpu():
    s, _ = session([FDev(), FDev(errors={"memory": 15})])
    with pytest.raises(ProbeError) as exc:
        s.read()
    assert exc.value.where == "GPU 1"
    assert "fallen off the bus" in exc.value.what
    s.read([0])                                      # the other GPU still reads


def test_lost_during_optional_field_still_raises():
    s, _ = session([FDev(errors={"util": 15})])
    with pytest.raises(ProbeError, match="fallen off the bus"):
        s.read()


def test_permission_denied_for_processes_is_a_note():
    s, _ = session([FDev(errors={"procs": 4})])
    g, = s.read()
    assert any("no permission to list the processes" in n for n in g.notes)


def test_close_shuts_down_and_next_read_reinitialises():
    s, lib = session([FDev()])
    s.read()
    s.close()
    s.read()
    assert lib.calls.count("nvmlShutdown") == 1 and lib.calls.count("nvmlInit") == 2


def test_old_driver_without_v3_process_call_falls_back_to_v2():
    s, lib = session([FDev(procs=[(1234, 3 * GIB)], errors={"procs_v3": "mismatch"})])
    g, = s.read()
    assert [p.pid for p in g.processes] == [1234] and "procs_v2" in lib.calls
    s, _ = session([FDev(errors={"procs_v3": "mismatch", "procs": 13})])   # not even v2
    assert s.read()[0].processes == ()


def test_skip_lost_gives_a_stand_in_and_retries_next_time():
    from vramguard.probe.nvml import is_lost
    lost = FDev(uuid="GPU-b", errors={"memory": 15})
    s, _ = session([FDev(uuid="GPU-a"), lost])
    a, b = s.read(skip_lost=True)
    assert not is_lost(a) and is_lost(b) and b.index == 1
    assert "fallen off the bus" in b.notes[0]
    lost.errors.clear()                              # back after a reset
    assert not is_lost(s.read(skip_lost=True)[1])
