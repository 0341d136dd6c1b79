"""`vramguard plan` end to end: through cli.main and as a subprocess, with the real model
resolver (embedded catalog, --offline) and the real planner."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vramguard.cli import main
from vramguard.commands.plan import parse_options

ROOT = Path(__file__).resolve().parent.parent
MODEL = "Qwen/Qwen2.5-7B-Instruct"       # in the embedded catalog: no network needed


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path, monkeypatch):
    """Never read the developer's own calibration store."""
    monkeypatch.setenv("VRAMGUARD_DATA_DIR", str(tmp_path / "data"))


def run(capsys, *argv):
    rc = main(["plan", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


# ---- option splitting (no planner) ------------------------------------------------------
def test_parse_options_splits_own_flags():
    o = parse_options(["m", "--gpu", "A100", "-tp", "2", "--json", "--gpu-memory-gib=40",
                       "--max-model-len", "8k", "--engine", "v1", "--vllm_version", "0.9.2",
                       "--fail-on-error", "--all-ranks", "--offline"])
    assert (o.gpu, o.gpu_memory_gib, o.engine, o.vllm_version) == (["A100"], "40", "v1", "0.9.2")
    assert o.json and o.fail_on_error and o.all_ranks and o.offline
    assert o.vllm_tokens == ["m", "-tp", "2", "--max-model-len", "8k"]
    assert o.pasted is None


def test_parse_options_pasted():
    o = parse_options(["--gpu", "L4", "-tp", "2", "--", "vllm", "serve", "m", "--port", "80",
                       "--json", "--vllm-version", "0.9.2"])
    assert o.gpu == ["L4"] and o.json and o.vllm_version == "0.9.2"   # own options anywhere
    assert o.pasted == ["vllm", "serve", "m", "--port", "80"]
    assert o.vllm_tokens == ["-tp", "2"]


def test_quoted_line_followed_by_options(capsys):
    rc, out, err = run(capsys, "--", f"VLLM_USE_V1=1 vllm serve {MODEL} --max-model-len 8k",
                       "--offline", "--json", "--vllm-version", "0.10.1", "-tp", "2")
    assert rc == 0, err
    d = json.loads(out)
    assert d["vllm_version"] == "0.10.1" and d["engine"] == "v1"
    assert d["settings"]["max_model_len"] == 8000 and d["settings"]["tensor_parallel_size"] == 2


def test_help(capsys):
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and "usage: vramguard plan" in out and "--fail-on-error" in out


# ---- bad input: exit 2, one line, no traceback -----------------------------------------
@pytest.mark.parametrize("argv,needle", [
    ([], "no model given"),
    ([MODEL, "--max-modle-len", "4096"], "Did you mean --max-model-len"),
    ([MODEL, "--gpu-memory-utilization", "2"], "0 < value <= 1"),
    ([MODEL, "--max-model-len", "lots"], "25.6k"),
    ([MODEL, "--gpu", "H900"], "unknown GPU"),
    ([MODEL, "--gpu", "H100:0"], "invalid GPU count '0'"),
    ([MODEL, "--gpu", "L4,H900"], "unknown GPU 'H900'"),
    ([MODEL, "--gpu"], "expected a value"),
    ([MODEL, "--gpu-memory-gib", "-3"], "GiB > 0"),
    ([MODEL, "--engine", "v2"], "v0 or v1"),
    ([MODEL, "--gpu", "L4", "--gpu-free-gib", "30"], "more than the 22.05 GiB total of L4"),
    (["--", "vllm", "serve", MODEL, "--bogus-flag"], "unknown flag '--bogus-flag'"),
    (["--json=yes", MODEL], "takes no value"),
    (["--gpu", "A100", "--"], "nothing after `--`"),
    # huge finite values: bounded before `int(x * GIB)` could overflow
    ([MODEL, "--gpu-memory-gib", "1e308"], "<= 1,048,576"),
    ([MODEL, "--gpu-free-gib", "1e308"], "<= 1,048,576"),
    ([MODEL, "--cpu-offload-gb", "1e308"], "cpu_offload_gb must be between 0 and"),
    ([MODEL, "--swap-space", "1e308", "--vllm-version", "0.17.1"],
     "swap_space must be between 0 and"),
    ([MODEL, "-pp", "29"], "larger than the model's 28 decoder layers"),
    (["--", "VLLM_USE_V1=0 vllm serve " + MODEL], "VLLM_USE_V1=0: vLLM 0.33.0 has no v0 engine"),
    (["--", "vllm serve " + MODEL + " --gpu L40S"],
     "--gpu is vramguard's option, not vLLM's: give it outside the quoted launch command"),
])
def test_bad_input_exit_2(capsys, argv, needle):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("vramguard plan: error: ")


# ---- real plans -------------------------------------------------------------------------
def test_plan_text_ok(capsys):
    rc, out, err = run(capsys, MODEL, "--gpu", "A100-80GB", "--offline", "--max-model-len", "32k")
    assert rc == 0, err
    assert "starts" in out and "A100-80GB" in out
    for label in ("total (CUDA)", "weights", "activation peak", "non-torch", "CUDA graphs",
                  "KV cache", "bytes/token", "block size", "max concurrency"):
        assert label in out
    assert "\033[" not in out       # not a tty: no colour


def test_default_gpu_is_stated(capsys):
    rc, out, _ = run(capsys, MODEL, "--offline")
    assert rc == 0 and "assumed H100-80GB" in out


def test_predicted_failure_exit_codes(capsys):
    argv = [MODEL, "--offline", "--gpu", "L4", "--max-model-len", "32768",
            "--gpu-memory-utilization", "0.5"]
    rc, out, _ = run(capsys, *argv)
    assert rc == 0 and "fails" in out            # a predicted failure is still a plan
    rc, out, _ = run(capsys, *argv, "--fail-on-error")
    assert rc == 1
    rc, out, _ = run(capsys, *argv, "--json", "--fail-on-error")
    assert rc == 1 and json.loads(out)["startup"]["ok"] is False


def test_json_schema_keys(capsys):
    rc, out, _ = run(capsys, MODEL, "--offline", "--gpu", "A100-80GB", "--json", "-tp", "2")
    assert rc == 0
    d = json.loads(out)
    assert d["schema_version"] == 1
    assert {"schema_version", "model", "gpu", "vllm_version", "engine", "startup", "per_gpu",
            "ranks", "kv_cache", "settings", "settings_sources", "log_lines", "assumptions",
            "fixes", "calibrated"} <= set(d)
    assert {"ok", "failure", "message", "risks"} <= set(d["startup"])
    assert {"total_bytes", "requested_bytes", "weights_bytes", "activation_bytes",
            "non_torch_bytes", "cuda_graph_bytes", "kv_cache_bytes"} <= set(d["per_gpu"])
    assert {"bytes_per_token", "block_size", "num_blocks", "tokens", "max_concurrency",
            "max_model_len"} <= set(d["kv_cache"])
    assert len(d["ranks"]) == 2 and "terms" in d["ranks"][0]
    assert d["settings"]["tensor_parallel_size"] == 2
    assert all(isinstance(v, int) for k, v in d["per_gpu"].items() if k.endswith("_bytes"))


def test_pasted_command_forms_agree(capsys):
    flags = ["--gpu", "A100-80GB", "--offline", "--json"]
    rc, a, _ = run(capsys, MODEL, "--max-model-len", "16k", "-tp", "2", *flags)
    rc2, b, _ = run(capsys, *flags, "--", "vllm", "serve", MODEL, "--max_model_len=16k",
                    "--tensor-parallel-size", "2", "--port", "8000")
    rc3, c, _ = run(capsys, *flags, "--",
                    f"CUDA_VISIBLE_DEVICES=0,1 vllm serve {MODEL} --max-model-len 16k -tp 2")
    assert rc == rc2 == rc3 == 0
    ka, kb, kc = (json.loads(x)["kv_cache"] for x in (a, b, c))
    assert ka == kb == kc


def test_pasted_without_dashdash(capsys):
    flags = ["--offline", "--json"]
    rc, a, _ = run(capsys, "vllm", "serve", MODEL, "-tp", "2", *flags)
    rc2, b, _ = run(capsys, f"VLLM_USE_V1=1 vllm serve {MODEL} -tp 2", *flags)
    assert rc == rc2 == 0
    assert json.loads(a)["kv_cache"] == json.loads(b)["kv_cache"]
    assert json.loads(a)["settings"]["tensor_parallel_size"] == 2


def test_docker_tag_sets_version(capsys):
    rc, out, _ = run(capsys, "--offline", "--json", "--", "docker", "run", "--gpus", "all",
                     "vllm/vllm-openai:v0.8.5", "--model", MODEL, "--max-model-len", "8192")
    assert rc == 0
    d = json.loads(out)
    assert d["vllm_version"].startswith("0.8")
    assert any("docker image tag" in a for a in d["assumptions"])


def test_flags_before_dashdash_override_pasted(capsys):
    rc, out, _ = run(capsys, "--offline", "--json", "--max-model-len", "8192", "--",
                     "vllm", "serve", MODEL, "--max-model-len", "32768")
    assert rc == 0 and json.loads(out)["settings"]["max_model_len"] == 8192


def test_gpu_memory_gib_alone_and_override(capsys):
    rc, out, _ = run(capsys, MODEL, "--offline", "--json", "--gpu-memory-gib", "40")
    assert rc == 0 and json.loads(out)["per_gpu"]["total_bytes"] == 40 << 30
    rc, out, _ = run(capsys, MODEL, "--offline", "--json", "--gpu", "A100-80GB",
                     "--gpu-memory-gib", "70")
    assert rc == 0 and json.loads(out)["per_gpu"]["total_bytes"] == 70 << 30


def test_a_given_total_is_the_users(capsys):
    rc, out, _ = run(capsys, MODEL, "--offline", "--json", "--gpu", "RTX-4090",
                     "--gpu-memory-gib", "47.5")
    rank = json.loads(out)["ranks"][0]
    assert rc == 0 and rank["terms"]["total"]["source"] == "user"
    rc, out, _ = run(capsys, MODEL, "--offline", "--json", "--gpu", "A100-80GB")
    assert json.loads(out)["ranks"][0]["terms"]["total"]["source"] == "catalog"


@pytest.mark.parametrize("name,want", [("RTX 4090 24GB", "RTX-4090"), ("H200 141GB", "H200"),
                                       ("A100 80 GB", "A100-80GB"), ("RTX 3090 24G", "RTX-3090"),
                                       ("RTX 4070 12GB", "RTX-4070")])
def test_gpu_names_with_their_memory_size(name, want):
    from vramguard.core.gpu_catalog import lookup_gpu
    assert lookup_gpu(name).name == want


def test_a_size_the_card_does_not_have_says_what_to_pass(capsys):
    rc, _, err = run(capsys, MODEL, "--offline", "--gpu", "RTX 4090 48GB")
    assert rc == 2
    assert ("the catalog's RTX-4090 has 24 GB, not 48GB: pass --gpu RTX-4090 --gpu-memory-gib"
            in err)


def test_gpu_counts_and_lists(capsys):
    """`--gpu` takes tune's forms (`H100:2`, `2xH100`, `A,B`, repeated): one model plans the
    same as its bare name (the GPU count is TP x PP); several models plan the smallest card,
    the tightest rank, and say so."""
    def plan_json(*gpu_args):
        rc, out, err = run(capsys, MODEL, "-tp", "2", "--offline", "--json", *gpu_args)
        assert rc == 0, err
        return json.loads(out)
    bare = plan_json("--gpu", "H100")
    for form in (("--gpu", "2xH100"), ("--gpu", "H100:2"), ("--gpu", "2 x H100-80GB"),
                 ("--gpu", "H100", "--gpu", "H100"), ("--gpu", "H100,H100")):
        assert plan_json(*form)["per_gpu"] == bare["per_gpu"], form
    mixed = plan_json("--gpu", "L40S,L4")
    assert mixed["gpu"] == "L4"
    assert mixed["per_gpu"] == plan_json("--gpu", "L4")["per_gpu"]
    assert any("planned on the smallest, L4" in n for n in mixed["assumptions"])


def test_a_separate_drafter_is_planned(capsys):
    """--speculative-config with a "model": the drafter's weights and KV layers are in the
    plan (Qwen2.5-1.5B + Qwen2.5-0.5B: 28,672 + 12,288 B/token); an unreadable one is named
    as not counted."""
    def plan_json(draft):
        conf = json.dumps({"method": "draft_model", "model": draft, "num_speculative_tokens": 3})
        rc, out, err = run(capsys, "--gpu", "RTX-4090", "--json", "--offline", "--",
                           "vllm", "serve", "Qwen/Qwen2.5-1.5B-Instruct",
                           "--speculative-config", conf, "--max-model-len", "16384")
        assert rc == 0, err
        return json.loads(out)
    doc = plan_json("Qwen/Qwen2.5-0.5B-Instruct")
    assert doc["kv_cache"]["bytes_per_token"] == 40_960
    assert any("Speculative decoding with Qwen/Qwen2.5-0.5B-Instruct (draft_model)" in a
               for a in doc["assumptions"])
    missing = plan_json("nobody/nothing")
    assert missing["kv_cache"]["bytes_per_token"] == 28_672
    assert any(a.startswith("drafter nobody/nothing: ") and "not counted" in a
               for a in missing["assumptions"])


def test_config_yaml(capsys, tmp_path):
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(f"model: {MODEL}\nmax-model-len: 4096\ntensor_parallel_size: 2\n")
    rc, out, _ = run(capsys, "--offline", "--json", "--config", str(cfg), "-tp", "1")
    assert rc == 0
    d = json.loads(out)
    assert d["settings"]["max_model_len"] == 4096 and d["settings"]["tensor_parallel_size"] == 1


def test_calibration_from_the_store(capsys, tmp_path):
    from vramguard.logs.store import Store
    db = tmp_path / "cal.sqlite3"
    with Store(db) as store:
        store.add({"digest": "t1", "model": MODEL, "model_family": "qwen2", "gpu": "A100-80GB",
                   "vllm_version": "0.11.0", "tp": 1, "pp": 1, "flags": {},
                   "activation_bytes": 3 << 30, "non_torch_bytes": 1 << 30,
                   "cuda_graph_bytes": 0, "max_num_batched_tokens": 2048, "max_num_seqs": 256})
    argv = [MODEL, "--offline", "--json", "--gpu", "A100-80GB", "--vllm-version", "0.11.0",
            "--db", str(db)]
    rc, out, _ = run(capsys, *argv)
    d = json.loads(out)
    assert rc == 0 and d["calibrated"] is True
    assert d["ranks"][0]["terms"]["activation"]["source"] == "calibrated"
    rc, out, _ = run(capsys, *argv, "--no-calibration")
    assert json.loads(out)["calibrated"] is False
    rc, out, _ = run(capsys, *argv[:-2])           # default store: empty data dir
    assert json.loads(out)["calibrated"] is False


# ---- as a subprocess ------------------------------------------------------------------
def _sub(*argv):
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT / "src"),
               VRAMGUARD_DATA_DIR=os.environ["VRAMGUARD_DATA_DIR"])
    return subprocess.run([sys.executable, "-m", "vramguard", "plan", *argv],
                          capture_output=True, text=True, env=env, timeout=60)


def test_subprocess_exit_codes():
    ok = _sub(MODEL, "--offline", "--gpu", "A100-80GB")
    assert ok.returncode == 0, ok.stderr
    assert "starts" in ok.stdout
    bad = _sub(MODEL, "--offline", "--max-model-len", "x")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") == 1
    fail = _sub(MODEL, "--offline", "--gpu", "L4", "--max-model-len", "32768",
                "--gpu-memory-utilization", "0.5", "--fail-on-error")
    assert fail.returncode == 1, fail.stderr


def test_plan_imports_stay_lazy():
    """A plain plan never imports yaml, argparse, or the heavy optional libraries."""
    code = ("import sys; from vramguard.cli import main; "
            f"rc = main(['plan', {MODEL!r}, '--offline', '--gpu', 'A100-80GB']); "
            "heavy = ('yaml', 'argparse', 'huggingface_hub', 'gguf', 'pynvml', 'numpy', "
            "'prometheus_client', 'psutil', 'safetensors', 'torch', 'platformdirs', "
            "'sqlite3', 'shlex'); "
            "print('LOADED', sorted(m for m in heavy if m in sys.modules))")
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT / "src"),
               VRAMGUARD_DATA_DIR=os.environ["VRAMGUARD_DATA_DIR"])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED []" in proc.stdout


def test_vllm_validation_is_bad_input(capsys):
    rc, out, err = run(capsys, MODEL, "--offline", "--max-model-len", "200k")
    assert rc == 2 and out == "" and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in err
    assert err.count("\n") == 1


def test_allow_long_max_model_len_env_accepts_the_length(capsys):
    """VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 turns vLLM's error into a warning: the plan goes on at
    that length and says so."""
    rc, out, err = run(capsys, "--offline", "--json", "--", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
                       "vllm", "serve", MODEL, "--max-model-len", "200k", "--gpu", "H100")
    assert rc == 0, err
    d = json.loads(out)
    assert d["settings"]["max_model_len"] == 200_000 and d["kv_cache"]["max_model_len"] == 200_000
    assert any(a.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: max_model_len 200000 is above")
               for a in d["assumptions"])


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from([
    MODEL, "--gpu", "A100", "L4", "--json", "--all-ranks", "-tp", "2", "--max-model-len", "8k",
    "auto", "--gpu-memory-utilization", "0.3", "1.2", "--", "vllm", "serve", "--engine", "v0",
    "--vllm-version", "0.6.3", "0.20.0", "--gpu-memory-gib", "24", "--gpu-free-gib", "10",
    "--fail-on-error", "--kv-cache-dtype", "fp8", "--enforce-eager", "--bogus", "x"]),
    max_size=8))
def test_fuzz_command_exit_codes(capsys, argv):
    rc = main(["plan", *argv, "--offline"])
    out, err = capsys.readouterr()
    assert rc in (0, 1, 2)
    if rc == 2:
        assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG paths")
def test_default_store_probe_skips_platformdirs(tmp_path, monkeypatch):
    from vramguard.logs.store import default_db_may_exist, default_db_path
    monkeypatch.delenv("VRAMGUARD_DATA_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert not default_db_may_exist()
    default_db_path().parent.mkdir(parents=True)      # where platformdirs puts it
    assert default_db_may_exist()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG paths")
@pytest.mark.parametrize("xdg", [None, "xdg", "  "])
def test_default_store_path_is_platformdirs_without_importing_it(tmp_path, monkeypatch, xdg):
    """The store's default path follows platformdirs' XDG rule, computed without importing
    it (plan reads the store on every run)."""
    import platformdirs

    from vramguard.logs.store import default_db_path
    monkeypatch.delenv("VRAMGUARD_DATA_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if xdg is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / xdg) if xdg.strip() else xdg)
    assert default_db_path().parent == Path(platformdirs.user_data_dir("vramguard"))


def test_pasted_env_reaches_the_planner(capsys):
    """VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 in a pasted line: graphs leave the budget."""
    def kv(line):
        assert main(["plan", "--gpu", "H100", "--json", "--", line]) == 0
        return json.loads(capsys.readouterr().out)
    on = kv("vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 8192")
    off = kv("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 vllm serve Qwen/Qwen2.5-7B-Instruct "
             "--max-model-len 8192")
    graphs = on["per_gpu"]["cuda_graph_bytes"]
    assert graphs > 0
    assert off["per_gpu"]["kv_cache_bytes"] - on["per_gpu"]["kv_cache_bytes"] == graphs
    assert not any("ESTIMATE_CUDAGRAPHS" in a and "not modeled" in a for a in off["assumptions"])


def test_hf_overrides_extend_the_derived_length(capsys):
    """--hf-overrides rope_scaling (YaRN x4) lifts vLLM's derived max_model_len: 131072 is
    refused without it (exit 2, vLLM's words) and plans with it."""
    args = ("Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--max-model-len", "131072",
            "--vllm-version", "0.29.0", "--offline", "--json")
    rc, _, err = run(capsys, *args)
    assert rc == 2 and "greater than the derived max_model_len" in err
    yarn = '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, ' \
           '"original_max_position_embeddings": 32768}}'
    rc, out, _ = run(capsys, *args, "--hf-overrides", yarn)
    plan = json.loads(out)
    assert plan["settings"]["max_model_len"] == 131072
    assert any("overridden" in a for a in plan["assumptions"])
    # 0.30+ takes max_position_embeddings as already scaled: the fix names the override
    newest = [a if a != "0.29.0" else "0.33.0" for a in args]
    rc, _, err = run(capsys, *newest, "--hf-overrides", yarn)
    assert rc == 2 and '"max_position_embeddings": 131072 to --hf-overrides' in err
    both = yarn[:-1] + ', "max_position_embeddings": 131072}'
    rc, out, _ = run(capsys, *newest, "--hf-overrides", both)
    assert json.loads(out)["settings"]["max_model_len"] == 131072


@pytest.mark.parametrize("encoding", ["cp437", "latin-1", "ascii"])
def test_consoles_that_are_not_utf8(encoding):
    """Text falls back to ASCII/'?' and --json to \\u escapes: no UnicodeEncodeError on a
    console that cannot print vLLM's "…" (cp437, latin-1, a C locale)."""
    env = dict(os.environ, PYTHONIOENCODING=encoding, PYTHONPATH=str(ROOT / "src"),
               VRAMGUARD_DATA_DIR=os.environ["VRAMGUARD_DATA_DIR"])
    base = [sys.executable, "-m", "vramguard", "plan", MODEL, "--offline"]
    text = subprocess.run(base, capture_output=True, env=env, timeout=60)
    assert text.returncode == 0 and b"Traceback" not in text.stderr, text.stderr
    assert b"Model loading took" in text.stdout
    js = subprocess.run(base + ["--json"], capture_output=True, env=env, timeout=60)
    assert js.returncode == 0, js.stderr
    d = json.loads(js.stdout.decode("ascii"))
    assert any(line.endswith("\u2026 seconds") for line in d["log_lines"])


def test_a_db_that_cannot_be_read_is_said(capsys, tmp_path):
    """`--db FILE` given on purpose but unreadable (missing, not SQLite, somebody else's
    SQLite): the plan says it went without a calibration, instead of saying nothing."""
    import sqlite3
    bad, foreign = tmp_path / "bad.db", tmp_path / "foreign.db"
    bad.write_bytes(b"not a database")
    with sqlite3.connect(foreign) as c:
        c.execute("create table foo(x)")
    for db, why in ((tmp_path / "none.db", "no such file"), (bad, "not a database"),
                    (foreign, "not a vramguard calibration store")):
        rc, out, err = run(capsys, MODEL, "--offline", "--json", "--db", str(db))
        assert rc == 0, err
        said = [a for a in json.loads(out)["assumptions"] if a.startswith(f"--db {db}")]
        assert said and why in said[0] and said[0].endswith("planned without a calibration")
