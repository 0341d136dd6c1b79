"""`vramguard check` and `vramguard run` in-process, with the probes replaced by fakes
(read_gpus / read_host monkeypatched) and the real planner and model catalog."""

from __future__ import annotations

import json

import pytest

from probe_fakes import GIB, state
from vramguard import cli
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.errors import ProbeError
from vramguard.probe.adjust import Change
from vramguard.probe.host import HostState
from vramguard.commands.run import apply_changes, split_env

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
H100 = lookup_gpu("H100-80GB")


def gpus(*frees, procs=None):
    from dataclasses import replace
    out = []
    for i, f in enumerate(frees):
        p = (procs or {}).get(i, ())
        out.append(replace(state(i, free_gib=f, procs=p), spec=H100))
    return out


@pytest.fixture
def machine(monkeypatch):
    """Set the GPUs the fake NVML returns: machine(gpus(...)). Records the reads."""
    reads = []
    box = {"gpus": gpus(78), "host": HostState(ram_total_bytes=512 * GIB,
                                                ram_available_bytes=500 * GIB,
                                                shm_total_bytes=16 * GIB)}

    def read_gpus(indices=None, **_):
        reads.append(indices)
        if isinstance(box["gpus"], Exception):
            raise box["gpus"]
        return list(box["gpus"])
    monkeypatch.setattr("vramguard.probe.nvml.read_gpus", read_gpus)
    monkeypatch.setattr("vramguard.probe.nvml.read_peer_link", lambda indices: box.get("link"))
    monkeypatch.setattr("vramguard.probe.host.read_host", lambda: box["host"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def set_(g=None, host=None, link=None):
        if g is not None:
            box["gpus"] = g
        if host is not None:
            box["host"] = host
        box["link"] = link
    set_.reads = reads
    return set_


def run_json(capsys, *argv):
    rc = cli.main(["check", "--json", "--offline", "--vllm-version", "0.33.0", *argv])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else None), out.err


def test_safe_json_schema(machine, capsys):
    rc, d, _ = run_json(capsys, MODEL, "--max-model-len", "8192")
    assert rc == 0 and d["ok"] is True
    g = d["gpus"][0]
    for key in ("index", "name", "total_bytes", "free_bytes", "processes"):
        assert key in g
    assert g["name"] == "NVIDIA H100-80GB" or g["name"].startswith("NVIDIA H100")
    assert d["plan"]["startup"]["ok"] is True and d["plan"]["vllm_version"] == "0.33.0"
    assert d["problems"] == []
    assert d["host"]["shm_total_bytes"] == 16 * GIB


def test_unsafe_exit_1_with_problem_and_fix(machine, capsys):
    machine(gpus(20, procs={0: ((4242, "python", 58),)}))
    rc, d, _ = run_json(capsys, "--", "vllm", "serve", MODEL)
    assert rc == 1 and d["ok"] is False
    p = d["problems"][0]
    assert set(p) >= {"kind", "message", "fix"}
    assert p["kind"] == "free_memory_below_request"
    assert "PID 4242" in p["fix"]
    assert d["gpus"][0]["processes"][0] == {"pid": 4242, "name": "python",
                                           "used_bytes": 58 * GIB}


def test_peer_link_decides_the_custom_all_reduce_memory(machine, capsys):
    """TP 2 on two H100s under 0.19 (custom all-reduce memory lands in non-torch): NVLink or
    peer access keeps it, no peer access turns it off (vLLM: "lacks GPU P2P capability");
    an unknown link falls back to the GPU's class (H100: on). The check says which."""
    from vramguard.core import activation as act
    full = act.NON_TORCH_BASE + act.NON_TORCH_TP
    small = act.NON_TORCH_BASE          # NOTE: no custom all-reduce: no TP share in N
    argv = ("--vllm-version", "0.19.0", MODEL, "-tp", "2", "--max-model-len", "8192")
    seen = {}
    for link in ("nvlink", "p2p", "none", None):
        machine(gpus(78, 78), link=link)
        rc, d, _ = run_json(capsys, *argv)
        assert rc == 0, d
        seen[link] = d["plan"]["per_gpu"]["non_torch_bytes"]
        assert any(f"peer link (NVML): {link}" in n for n in d["notes"]) == (link is not None)
    assert seen == {"nvlink": full, "p2p": full, "none": small, None: full}


def test_text_output(machine, capsys):
    machine(gpus(78, 20, procs={1: ((4242, "python", 58),)}))
    rc = cli.main(["check", "--offline", "--no-host", MODEL, "-tp", "2"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "UNSAFE to launch: GPU 1 decides" in out
    assert "PID 4242 python 58.00 GiB" in out
    assert "fix: " in out


def test_cuda_visible_devices_from_the_pasted_command(machine, capsys):
    machine(gpus(20, 78, procs={0: ((1, "x", 58),)}))
    rc, d, _ = run_json(capsys, "--", "CUDA_VISIBLE_DEVICES=1", "vllm", "serve", MODEL)
    assert rc == 0
    assert [g["index"] for g in d["gpus"]] == [1]


def test_this_shells_vllm_variables_are_what_vllm_will_see(machine, capsys, monkeypatch):
    """check gates a launch here and now: vLLM inherits this shell's VLLM_* variables (the
    pasted ones win)."""
    long = ("--", "vllm", "serve", MODEL, "--max-model-len", "262144")
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    rc, _, err = run_json(capsys, *long)
    assert rc == 2 and "is greater than the derived max_model_len" in err
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    rc, d, _ = run_json(capsys, *long)
    assert rc in (0, 1) and d["plan"]["settings"]["max_model_len"] == 262144
    rc, _, err = run_json(capsys, "--", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=0", *long[1:])
    assert rc == 2 and "is greater than the derived max_model_len" in err


def test_malformed_cuda_visible_devices_is_exit_2_before_nvml(machine, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,,1")
    rc = cli.main(["check", "--offline", MODEL])
    assert rc == 2
    assert "CUDA_VISIBLE_DEVICES" in capsys.readouterr().err
    assert machine.reads == []


def test_probe_error_is_exit_2(machine, capsys):
    machine(ProbeError("the NVIDIA driver is not loaded", where="NVML", fix="modprobe"))
    rc = cli.main(["check", "--offline", MODEL])
    err = capsys.readouterr().err
    assert rc == 2 and "driver is not loaded" in err and "\n" == err[-1] and err.count("\n") == 1


def test_window_folds_samples(machine, capsys):
    rc, d, err = run_json(capsys, "--window", "0.3s", "--interval", "0.1s", MODEL,
                          "--max-model-len", "8192")
    assert rc == 0 and d["window"]["samples"] == 3
    assert "sampling the GPUs" in err
    assert d["gpus"][0]["free_min_bytes"] == 78 * GIB


def test_host_problem_makes_it_unsafe(machine, capsys):
    machine(gpus(78, 78), host=HostState(ram_available_bytes=500 * GIB,
                                         shm_total_bytes=64 << 20))
    rc, d, _ = run_json(capsys, MODEL, "-tp", "2", "--max-model-len", "8192")
    assert rc == 1 and [p["kind"] for p in d["problems"]] == ["shm_too_small"]


def test_usage_errors(machine, capsys):
    assert cli.main(["check"]) == 2                               # no model
    assert cli.main(["check", "--window", "soon", MODEL]) == 2
    assert cli.main(["check", "--headroom-gib", "-1", MODEL]) == 2
    assert cli.main(["check", MODEL, "--", "vllm", "serve", MODEL]) == 2
    assert cli.main(["check", "--help"]) == 0


# ---- run ------------------------------------------------------------------------------
@pytest.fixture
def execs(monkeypatch):
    calls = []

    def fake_exec(path, argv, env):
        calls.append((path, list(argv), env))
        raise SystemExit(0)
    monkeypatch.setattr("os.execvpe", fake_exec)
    return calls


def test_run_execs_the_command_untouched(machine, execs):
    argv = ["vllm", "serve", MODEL, "--max-model-len", "8192"]
    with pytest.raises(SystemExit):
        cli.main(["run", "--offline", "--", *argv])
    assert execs == [("vllm", argv, execs[0][2])]


def test_run_passes_env_words_to_the_exec(machine, execs):
    with pytest.raises(SystemExit):
        cli.main(["run", "--offline", "--", "VLLM_USE_V1=1", "vllm", "serve", MODEL,
                  "--max-model-len", "8192"])
    path, argv, env = execs[0]
    assert argv[0] == "vllm" and env["VLLM_USE_V1"] == "1"


def test_run_unsafe_does_not_exec(machine, execs, capsys):
    machine(gpus(20, procs={0: ((4242, "python", 58),)}))
    assert cli.main(["run", "--offline", "--", "vllm", "serve", MODEL]) == 1
    assert execs == []
    assert "not launching vLLM" in capsys.readouterr().err


def test_run_probe_failure_is_exit_2_unless_forced(machine, execs, capsys):
    machine(ProbeError("no NVIDIA driver found", where="NVML"))
    assert cli.main(["run", "--offline", "--", "vllm", "serve", MODEL]) == 2
    assert execs == []
    with pytest.raises(SystemExit):
        cli.main(["run", "--force", "--offline", "--", "vllm", "serve", MODEL])
    assert len(execs) == 1
    assert "WARNING: --force" in capsys.readouterr().err


def test_run_adjust_rewrites_flags(machine, execs, capsys):
    machine(gpus(40, procs={0: ((4242, "python", 38),)}))
    with pytest.raises(SystemExit):
        cli.main(["run", "--adjust", "--offline", "--vllm-version", "0.33.0", "--", "vllm",
                  "serve", MODEL, "--gpu-memory-utilization=0.9", "--max-model-len", "8192"])
    argv = execs[0][1]
    assert "--gpu-memory-utilization=0.9" not in argv
    i = argv.index("--gpu-memory-utilization")
    assert 0.3 < float(argv[i + 1]) < 0.5
    assert argv[:3] == ["vllm", "serve", MODEL] and "--max-model-len" in argv
    assert "--adjust: --gpu-memory-utilization 0.9 ->" in capsys.readouterr().err


def test_run_dry_run_and_no_command(machine, capsys):
    assert cli.main(["run", "--dry-run", "--offline", "--", "vllm", "serve", MODEL,
                     "--max-model-len", "8192"]) == 0
    assert capsys.readouterr().out.strip() == f"vllm serve {MODEL} --max-model-len 8192"
    line = f"CUDA_VISIBLE_DEVICES=0 vllm serve {MODEL} --max-model-len 8192"
    assert cli.main(["run", "--dry-run", "--offline", "--", line]) == 0   # one quoted line
    assert capsys.readouterr().out.strip() == line
    assert cli.main(["run", "--offline"]) == 2
    assert cli.main(["run", MODEL]) == 2                 # vLLM flags only after --
    assert cli.main(["run", "--poll", "0", "--", "vllm", "serve", MODEL]) == 2


def test_run_wait_for_free_polls_until_free(machine, execs, monkeypatch):
    busy = gpus(20, procs={0: ((4242, "python", 58),)})
    states = iter([busy, busy, gpus(78)])
    monkeypatch.setattr("vramguard.probe.nvml.read_gpus", lambda indices=None, **_: next(states))
    monkeypatch.setattr("time.sleep", lambda s: None)
    with pytest.raises(SystemExit):
        cli.main(["run", "--wait-for-free", "60s", "--poll", "1s", "--offline", "--", "vllm",
                  "serve", MODEL, "--max-model-len", "8192"])
    assert len(execs) == 1


def test_apply_changes_and_split_env():
    changes = [Change("gpu_memory_utilization", 0.9, 0.45, "x"),
               Change("max_model_len", 131072, 8192, "y")]
    argv = ["vllm", "serve", "M", "--gpu_memory_utilization", "0.9", "--max-model-len=131072",
            "--tp", "2"]
    assert apply_changes(argv, changes) == ["vllm", "serve", "M", "--tp", "2",
                                            "--gpu-memory-utilization", "0.45",
                                            "--max-model-len", "8192"]
    assert split_env(["A=1", "B=x=y", "vllm", "C=3"]) == ({"A": "1", "B": "x=y"},
                                                          ["vllm", "C=3"])


def test_k8s_example_init_container_command(machine, capsys):
    """deploy/k8s: the init container checks exactly the command the vllm container runs,
    and that command parses and passes on two free H100s."""
    from pathlib import Path

    import yaml
    root = Path(__file__).resolve().parents[2]
    doc = yaml.safe_load((root / "deploy/k8s/vllm-with-vramguard.yaml").read_text())
    pod = doc["spec"]["template"]["spec"]
    init, app = pod["initContainers"][0], pod["containers"][0]
    gate = init["command"] + init["args"]
    assert gate[:2] == ["vramguard", "check"] and "--" in gate
    vllm_cmd = gate[gate.index("--") + 1:]
    assert app["command"][:len(vllm_cmd)] == vllm_cmd
    assert init["resources"]["limits"]["nvidia.com/gpu"] == app["resources"]["limits"][
        "nvidia.com/gpu"]
    machine(gpus(78, 78))
    argv = [a for a in gate[2:] if a not in ("--window", "30s")]   # no 30 s wait in a test
    assert cli.main(["check", "--offline", "--vllm-version", "0.11.0", *argv]) == 0
    assert "SAFE to launch" in capsys.readouterr().out
