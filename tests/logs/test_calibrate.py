"""calibrate -> store -> load_calibration -> plan, and history."""
import json

import pytest

from vramguard.cli import main
from vramguard.core.calibration import CalibrationKey
from vramguard.core.provenance import GIB
from vramguard.logs.calibrate import key_for_log
from vramguard.logs.compare import plan_for_log, settings_for_log
from vramguard.logs.learn import architecture_to_model_type, learn
from vramguard.logs.parser import parse, parse_text
from vramguard.logs.store import Store, load_calibration

from .conftest import load_cases

CASES = {c["id"]: c for c in load_cases()}
BANNER = "(APIServer pid=1) INFO vLLM API server version 0.19.0\n"
# 0.19 logs of the corpus whose models are in the catalog (so the planner can load them).
TARGET_CASES = ["llmdp-v0190-h100-llama31-8b-tp1", "llmdp-v0190-h100-llama31-8b-tp2",
                "llmdp-v0190-h100-llama31-8b-pp2", "llmdp-v0190-h100-qwen25-7b-tp4",
                "llmdp-v0190-h100-qwen3-30b-a3b-tp1", "llmdp-v0190-h100-dsv2-lite-tp1",
                "llmdp-v0190-h100-granite31-2b-tp1"]


def write_case(tmp_path, case_id, prefix=BANNER):
    path = tmp_path / f"{case_id}.log"
    path.write_text(prefix + CASES[case_id]["raw_log_excerpt"])
    return path


@pytest.mark.parametrize("case_id", TARGET_CASES)
def test_calibrated_plan_within_a_tenth_of_a_gib(case_id, tmp_path, data_dir):
    """The issue's target: calibrate on one startup, plan the same settings on that machine,
    and the plan's KV pool is within 0.1 GiB of what that vLLM printed."""
    path = write_case(tmp_path, case_id)
    assert main(["calibrate", str(path), "--gpu", "H100-80GB"]) == 0
    ex = parse(path)
    key, _ = key_for_log(ex, gpu="H100-80GB")
    cal = load_calibration(key, model=ex.model, settings=settings_for_log(ex)[0])
    assert cal is not None and cal.matches(key)
    plan, why = plan_for_log(ex, gpu="H100-80GB", calibration=cal)
    if plan is None:
        pytest.skip(why)
    assert plan.calibrated
    got = plan.tightest.kv_cache.value_bytes / GIB
    assert got == pytest.approx(ex.available_kv_gib, abs=0.1)


def test_learn_profile_and_combined_derivations():
    key = CalibrationKey("H100-80GB", "0.19.0", "llama")
    ex = parse_text(BANNER + CASES["llmdp-v0190-h100-llama31-8b-tp1"]["raw_log_excerpt"])
    got = learn(ex, key)
    cal = got.calibration
    assert got.derivation == "profile"
    assert (cal.weights_bytes, cal.activation_bytes, cal.non_torch_bytes, cal.cuda_graph_bytes) \
        == tuple(round(g * GIB) for g in (14.99, 1.89, 0.25, 0.84))
    # only weights + available KV (v1 at INFO level): combined term R - K - W, said so
    ex = parse_text("(APIServer pid=1) INFO vLLM API server version 0.11.0\n"
                    "non-default args: {'model': 'm', 'gpu_memory_utilization': 0.9}\n"
                    "Model loading took 14.99 GiB memory and 1.0 seconds\n"
                    "Available KV cache memory: 54.58 GiB\n")
    got = learn(ex, CalibrationKey("H100-80GB", "0.11.0", "llama"), total_gib=79.19)
    assert got.derivation == "combined" and got.calibration.non_torch_bytes == 0
    assert got.calibration.activation_bytes / GIB == pytest.approx(0.9 * 79.19 - 54.58 - 14.99,
                                                                   abs=1e-6)
    assert any("R − K − W" in n for n in got.notes)


def test_learn_027_suggestion_subtracts_the_graph_estimate():
    ex = parse_text("(APIServer pid=1) INFO vLLM API server version 0.27.1\n"
                    "Model loading took 7.5 GiB memory and 1 s\n"
                    "Estimated CUDA graph memory: 0.5 GiB total\n"
                    "Free memory on device (22.64/23.52 GiB) on startup. Desired GPU memory "
                    "utilization is (0.92, 21.64 GiB). Actual usage is 7.97 GiB for consumed "
                    "memory (weights + non-torch), 0.8 GiB for peak activation, and 1.28 GiB for"
                    " CUDAGraph memory. Current kv cache memory in use is 12.86 GiB.")
    cal = learn(ex, CalibrationKey("RTX-4090", "0.27.1", "qwen3")).calibration
    assert cal.non_torch_bytes == round(0.47 * GIB)
    assert cal.activation_bytes == round(0.3 * GIB) and cal.cuda_graph_bytes == round(0.5 * GIB)


def test_architecture_guess():
    assert architecture_to_model_type("Qwen3MoeForCausalLM") == "qwen3_moe"
    assert architecture_to_model_type("LlamaForCausalLM") == "llama"
    assert architecture_to_model_type("Qwen2_5_VLForConditionalGeneration") == "qwen2_5_vl"
    assert architecture_to_model_type("DeepseekV3ForCausalLM") == "deepseek_v3"


def test_store_roundtrip_dedupe_and_weights_policy(tmp_path, data_dir):
    a = write_case(tmp_path, "llmdp-v0190-h100-llama31-8b-tp1")
    b = write_case(tmp_path, "llmdp-v0190-h100-llama31-8b-fp32")
    assert main(["calibrate", str(a), str(b), str(a), "--gpu", "H100-80GB"]) == 0
    with Store() as store:
        rows = store.startups()
    assert len(rows) == 2                           # the same log twice is one startup
    key = CalibrationKey("H100-80GB", "0.19", "llama")   # "0.19" matches "0.19.0"
    cal = load_calibration(key, model="meta-llama/Llama-3.1-8B-Instruct")
    assert cal.matches(key) and cal.weights_bytes is not None
    assert load_calibration(key, model="other/model").weights_bytes is None
    assert load_calibration(CalibrationKey("H100-80GB", "0.19.0", "qwen2")) is None


def test_load_calibration_never_raises(tmp_path):
    key = CalibrationKey("H100-80GB", "0.19.0", "llama")
    assert load_calibration(key, db=tmp_path / "none.sqlite3") is None
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"not a database" * 100)
    assert load_calibration(key, db=bad) is None
    assert not (tmp_path / "none.sqlite3").exists()


def test_calibrate_needs_gpu_and_version(tmp_path, data_dir, capsys):
    path = write_case(tmp_path, "llmdp-v0190-h100-llama31-8b-tp1", prefix="")
    assert main(["calibrate", str(path), "--gpu", "H100-80GB"]) == 2
    assert "vLLM version" in capsys.readouterr().err
    path = write_case(tmp_path, "llmdp-v0190-h100-llama31-8b-tp1")
    assert main(["calibrate", str(path)]) == 2          # 79.19 GiB: SXM or PCIe?
    assert "--gpu" in capsys.readouterr().err
    assert main(["calibrate", str(path), "--gpu", "H100-80GB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results"][0]["derivation"] == "profile"


def test_history_and_compare(tmp_path, data_dir, capsys):
    assert main(["history"]) == 2                        # no store yet
    capsys.readouterr()
    paths = [write_case(tmp_path, c) for c in ("llmdp-v0190-h100-llama31-8b-tp1",
                                               "llmdp-v0190-h100-llama31-8b-kvfp8")]
    assert main(["calibrate", *map(str, paths), "--gpu", "H100-80GB"]) == 0
    capsys.readouterr()
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert "Llama-3.1-8B-Instruct" in out and "58.11" in out
    assert main(["history", "--compare", "1", "2", "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)
    assert cmp["flags"]["kv_cache_dtype"] == {"a": None, "b": "fp8"}
    assert cmp["concurrency_change"] == pytest.approx(116.21 - 58.11)
    assert main(["history", "--compare", "1", "9"]) == 2


def test_end_to_end_calibrate_then_plan_command(tmp_path, data_dir, capsys):
    """`vramguard calibrate LOG` then `vramguard plan` with the same settings: the plan is
    calibrated and its KV pool is within 0.1 GiB of the 58.11 GiB vLLM 0.19 printed."""
    path = write_case(tmp_path, "llmdp-v0190-h100-llama31-8b-tp1")
    assert main(["calibrate", str(path), "--gpu", "H100-80GB"]) == 0
    capsys.readouterr()
    rc = main(["plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB",
               "--vllm-version", "0.19.0", "--max-model-len", "8192",
               "--gpu-memory-utilization", "0.95", "--offline", "--json"])
    if rc != 0:
        pytest.skip("plan could not run offline here")
    out = json.loads(capsys.readouterr().out)
    assert out["calibrated"] is True
    assert out["per_gpu"]["kv_cache_bytes"] / GIB == pytest.approx(58.11, abs=0.1)


def _small_log(tmp_path, args: str = "", name: str = "small.log"):
    """A 0.10.1 startup with weights and available KV (enough for the combined term)."""
    path = tmp_path / name
    path.write_text(f"INFO non-default args: {{'model': 'Qwen/Qwen3-8B'{args}}}\n"
                    "INFO vLLM API server version 0.10.1\n"
                    "INFO Model loading took 15.27 GiB and 12.3 seconds\n"
                    "INFO Available KV cache memory: 54.29 GiB\n")
    return path


@pytest.mark.parametrize("args, field", [
    (", 'tensor_parallel_size': 'x'", "tensor_parallel_size 'x'"),
    (", 'pipeline_parallel_size': [1]", "pipeline_parallel_size [1]"),
    (", 'tensor_parallel_size': -1", "tensor_parallel_size -1"),
    (", 'tensor_parallel_size': 2.5", "tensor_parallel_size 2.5"),
    (", 'gpu_memory_utilization': 5.0", "gpu_memory_utilization 5.0"),
    (", 'gpu_memory_utilization': -1", "gpu_memory_utilization -1"),
    (", 'gpu_memory_utilization': 'abc'", "gpu_memory_utilization 'abc'"),
])
def test_calibrate_skips_a_log_with_impossible_logged_values(args, field, tmp_path, capsys):
    """Values the plan flags refuse are not keyed or stored; the reason names the value."""
    db = tmp_path / "c.sqlite3"
    rc = main(["calibrate", str(_small_log(tmp_path, args)), "--gpu", "H100-80GB",
               "--model-family", "qwen3", "--db", str(db), "--json"])
    assert rc == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert not result["learned"] and result["reason"].startswith(f"{field} in the log")
    with Store(db) as store:
        assert store.startups() == []
    assert main(["calibrate", str(_small_log(tmp_path)), "--gpu", "H100-80GB",
                 "--model-family", "qwen3", "--db", str(db)]) == 0      # the same log, sane


def test_calibrate_names_the_real_cause(tmp_path, capsys):
    """A bad --vllm-version is blamed on the flag; a --model that cannot load says why."""
    log = str(_small_log(tmp_path))
    db = str(tmp_path / "c.sqlite3")
    assert main(["calibrate", log, "--gpu", "H100-80GB", "--model-family", "qwen3",
                 "--vllm-version", "abc", "--db", db]) == 2
    err = capsys.readouterr().err
    assert "--vllm-version: cannot read vLLM version 'abc'" in err and "log does not" not in err
    assert main(["calibrate", log, "--gpu", "H100-80GB", "--model", str(tmp_path / "nope"),
                 "--db", db]) == 2
    err = capsys.readouterr().err
    assert "cannot tell the model family" in err and "cannot load" in err
    assert str(tmp_path / "nope") in err


def test_history_limit_and_compare_bounds(tmp_path, capsys):
    db = str(tmp_path / "c.sqlite3")
    assert main(["calibrate", str(_small_log(tmp_path)), "--gpu", "H100-80GB",
                 "--model-family", "qwen3", "--db", db]) == 0
    capsys.readouterr()
    for bad in ("0", "-1"):
        assert main(["history", "--db", db, "--limit", bad]) == 2
        assert "--limit: must be 1 or more" in capsys.readouterr().err
    assert main(["history", "--db", db, "--limit", "99999999999999999999", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert main(["history", "--db", db, "--compare", "99999999999999999999", "1"]) == 2
    assert "--compare: no startup with id 99999999999999999999" in capsys.readouterr().err


def test_store_refuses_a_foreign_sqlite_file_and_reading_writes_nothing(tmp_path, capsys):
    import sqlite3
    foreign = tmp_path / "f.sqlite3"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE foo(x)")
    log = str(_small_log(tmp_path))
    assert main(["history", "--db", str(foreign)]) == 2
    assert "not a vramguard calibration store" in capsys.readouterr().err
    assert main(["calibrate", log, "--gpu", "H100-80GB", "--model-family", "qwen3",
                 "--db", str(foreign)]) == 2
    assert "not a vramguard calibration store" in capsys.readouterr().err
    tables = sqlite3.connect(foreign).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("foo",)]
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    assert main(["history", "--db", str(empty)]) == 2           # read-only: nothing written
    assert "no calibration store yet" in capsys.readouterr().err
    assert empty.stat().st_size == 0
    assert main(["calibrate", log, "--gpu", "H100-80GB", "--model-family", "qwen3",
                 "--db", str(empty)]) == 0                       # an empty file becomes one
    assert main(["history", "--db", str(empty)]) == 0


def test_calibrate_without_a_gpu_says_it_once(tmp_path, capsys):
    log = str(_small_log(tmp_path))
    assert main(["calibrate", log, "--model-family", "qwen3",
                 "--db", str(tmp_path / "c.sqlite3")]) == 2
    err = capsys.readouterr().err
    assert "cannot tell the GPU: the log does not show the GPU's total memory. Pass --gpu NAME" \
        in err and err.count("--gpu") == 1


def test_logged_settings_keep_what_reads_when_one_value_does_not():
    """A logged command line's quoted JSON stays one value (the compilation config is read);
    a value vramguard cannot read drops that key only, with the reason."""
    log = ("INFO vLLM API server version 0.11.0\n"
           "Command: vllm serve Qwen/Qwen3-8B --max-model-len 8192 --compilation-config "
           "'{\"cudagraph_mode\": \"PIECEWISE\"}' --tensor-parallel-size 2\n")
    s, why = settings_for_log(parse_text(log))
    assert (s.cudagraph_mode, s.tensor_parallel_size, s.max_model_len, why) == \
        ("PIECEWISE", 2, 8192, None)
    bad = log.replace('\'{"cudagraph_mode": "PIECEWISE"}\'', "'{\"cudagraph_mode\": \"fast\"}'")
    s, why = settings_for_log(parse_text(bad))
    assert (s.cudagraph_mode, s.tensor_parallel_size, s.max_model_len) == (None, 2, 8192)
    assert "not compilation_config" in why and "cudagraph_mode" in why


def test_a_log_without_version_is_planned_for_a_release_with_its_flags():
    """vLLM started with the log's flags: without a version line, the plan is made for the
    newest release that has them (--swap-space: 0.17.1), not refused as the newest would."""
    from vramguard.core.settings import Settings
    from vramguard.core.argparse_checks import last_release_with_flags
    ex = parse_text("non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', "
                    "'swap_space': 16.0, 'max_model_len': 8192}\n")
    plan, why = plan_for_log(ex, gpu="H100-80GB")
    assert plan is not None, why
    assert plan.vllm_version == "0.17.1" and "(0.17.1)" in why
    assert last_release_with_flags(Settings(max_model_len=8192)) is None
