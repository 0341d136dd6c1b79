"""`vramguard tune` end to end through cli.main: text, JSON contract, plots, bad input."""

import json

import pytest

from vramguard.cli import main
from vramguard.commands.tune import gpu_names, parse_options
from vramguard.sources.vllm_args import parse_vllm_command

MODEL = "Qwen/Qwen2.5-7B-Instruct"      # in the embedded catalog: no network needed


def run(capsys, *argv):
    rc = main(["tune", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_parse_options_splits_own_flags_from_pins():
    o = parse_options([MODEL, "--gpu", "H100:2", "--gpu=L4", "-tp", "2", "--json",
                       "--workload", "p99=6k", "--max-model-len", "8k", "--concurrency", "16"])
    assert o.gpu == ["H100:2", "L4"] and o.json and o.workload == "p99=6k"
    assert o.concurrency == "16"
    assert o.vllm_tokens == [MODEL, "-tp", "2", "--max-model-len", "8k"]


@pytest.mark.parametrize("gpus,num,want", [
    (["H100:4"], None, ["H100"] * 4),
    (["A100", "A100"], None, ["A100", "A100"]),
    (["L4,L4,L4"], None, ["L4"] * 3),
    (["H100"], "8", ["H100"] * 8),
    (["H100:2"], "2", ["H100"] * 2),
    (["2xH100"], None, ["H100"] * 2),
    (["2 x L40S, L4"], None, ["L40S", "L40S", "L4"]),
    (["4×A100-80GB"], "4", ["A100-80GB"] * 4),
])
def test_gpu_names(gpus, num, want):
    o = parse_options([])
    o.gpu, o.num_gpus = gpus, num
    assert gpu_names(o) == want


def test_recommendation_text_and_exit_0(capsys):
    rc, out, err = run(capsys, MODEL, "--gpu", "RTX-3090", "--workload",
                       "p50=800,p90=2000,p99=6000", "--offline")
    assert rc == 0, err
    assert "Recommended" in out and "Options (ranked)" in out
    line = next(l.strip() for l in out.splitlines() if l.strip().startswith("vllm serve"))
    cmd = parse_vllm_command(line)
    assert cmd.model == MODEL and cmd.settings.max_model_len == 6144
    assert "max_model_len ↔ max concurrency" in out or "max_model_len <-> max" in out
    assert "gpu-memory-utilization:" in out          # the --config YAML


def test_json_contract(capsys):
    rc, out, _ = run(capsys, MODEL, "--gpu", "A100-80GB", "--workload", "p99=4000", "--json",
                     "--offline", "--concurrency", "32")
    assert rc == 0
    doc = json.loads(out)
    assert set(doc) >= {"recommended", "options", "reason"}
    rec = doc["recommended"]
    assert rec["command"].startswith(f"vllm serve {MODEL} ")
    assert rec["settings"]["max_num_seqs"] == 32
    assert rec["plan"]["startup"]["ok"] is True and rec["plan"]["schema_version"] == 1
    assert rec["gpus_needed"] == 1 and rec["needs_more_gpus"] == 0
    assert doc["reason"] is None
    first = doc["options"][0]
    for key in ("rank", "command", "settings", "starts", "meets_target", "gpus_needed",
                "needs_more_gpus", "concurrency_at_target", "max_model_len", "headroom_bytes"):
        assert key in first


def test_pins_are_kept_and_nothing_fits_exit_1(capsys):
    rc, out, err = run(capsys, "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4",
                       "--max-model-len", "32k", "-tp", "1", "--concurrency", "64",
                       "--no-more-gpus", "--json", "--offline")
    assert rc == 1, err
    doc = json.loads(out)
    assert doc["recommended"] is None and "does not fit" in doc["reason"]
    assert "at most" in doc["nearest"] and "max_model_len" in doc["blocking_pins"]
    assert all(o["max_model_len"] == 32000 for o in doc["options"])


def test_nothing_fits_text(capsys):
    rc, out, _ = run(capsys, "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4",
                     "--max-model-len", "32k", "-tp", "1", "--concurrency", "64",
                     "--no-more-gpus", "--offline")
    assert rc == 1
    assert "Nothing fits:" in out and "Nearest feasible:" in out
    assert "Pinned flags that make the target impossible: --max-model-len" in out


def test_pasted_command_pins(capsys):
    rc, out, err = run(capsys, "--gpu", "A100-80GB", "--workload", "p99=2000", "--json",
                       "--offline", "--", "vllm", "serve", MODEL, "--kv-cache-dtype", "fp8")
    assert rc == 0, err
    doc = json.loads(out)
    assert all(o["settings"].get("kv_cache_dtype") == "fp8" for o in doc["options"])
    assert "--kv-cache-dtype fp8" in doc["recommended"]["command"]


def test_flags_without_memory_effect_stay_on_the_commands(capsys, tmp_path):
    """A pasted launch's other flags (--port, --served-model-name, ...) are carried, as
    given, into every command and the YAML: the recommendation replaces the user's launch.
    Legacy n-gram speculation (0.7.3) keeps --ngram-prompt-lookup-max, which it needs."""
    import yaml

    rc, out, err = run(capsys, "--gpu", "RTX-3090", "--workload", "p99=6000", "--json",
                       "--offline", "--vllm-version", "0.7.3", "--", "vllm", "serve", MODEL,
                       "--port", "8001", "--served-model-name", "my model", "--speculative-model",
                       "[ngram]", "--num-speculative-tokens", "3", "--ngram-prompt-lookup-max",
                       "4", "--disable-log-requests")
    assert rc == 0, err
    doc = json.loads(out)
    rec = doc["recommended"]
    tail = ("--port 8001 --served-model-name 'my model' --ngram-prompt-lookup-max 4 "
            "--disable-log-requests")
    assert rec["command"].endswith(tail), rec["command"]
    assert all(o["command"].endswith(tail) for o in doc["options"])
    conf = yaml.safe_load(rec["config_yaml"])
    assert conf["port"] == 8001 and conf["served-model-name"] == "my model"
    assert conf["disable-log-requests"] is True
    again = parse_vllm_command(rec["command"])
    assert again.settings.num_speculative_tokens == 3 and again.passthrough[-1] == \
        "--disable-log-requests"
    assert not any("drafter" in n for n in doc["notes"])        # [ngram] is no model
    assert any(n.startswith("ignored (no effect on memory): --disable-log-requests --port")
               for n in doc["notes"])
    assert not any("--ngram-prompt-lookup-max" in n and n.startswith("ignored")
                   for n in doc["notes"])


def test_config_overrides_stay_on_the_recommended_command(capsys, tmp_path):
    """--hf-overrides that lengthen the model (YaRN) are written on the command and in the
    YAML: without them vLLM derives the shorter length and refuses the recommendation."""
    import yaml

    over = ('{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, '
            '"original_max_position_embeddings": 32768}, "max_position_embeddings": 131072}')
    rc, out, err = run(capsys, "Qwen/Qwen3-8B", "--gpu", "H100", "--workload", "p99=100000",
                       "--json", "--offline", "--hf-overrides", over)
    assert rc == 0, err
    rec = json.loads(out)["recommended"]
    assert rec["plan"]["settings"]["max_model_len"] > 40960
    again = parse_vllm_command(rec["command"])
    assert again.config_overrides == json.loads(over)
    assert yaml.safe_load(rec["config_yaml"])["hf-overrides"]
    path = tmp_path / "this.yaml"
    path.write_text(rec["config_yaml"])
    from_yaml = parse_vllm_command(f"vllm serve Qwen/Qwen3-8B --config {path}")
    assert from_yaml.config_overrides == json.loads(over)
    assert from_yaml.settings.config_overrides == again.settings.config_overrides


@pytest.mark.parametrize("version", ["0.33.0", "0.11.1", "0.11.0"])
def test_compilation_pins_round_trip(capsys, version):
    """Pinned CUDA-graph flags stay on the command and in the --config YAML, and both parse
    back to the same settings. Before 0.12 `-O` was --compilation-config itself (so the
    level goes inside the JSON, not beside it); before 0.11.1 the key was "level" and the
    capture sizes had no flag of their own."""
    import yaml

    from vramguard.sources.vllm_args import settings_from_mapping
    rc, out, err = run(capsys, "--gpu", "A100-80GB", "--workload", "p99=2000", "--json",
                       "--offline", "--vllm-version", version, "--", "vllm", "serve", MODEL,
                       "-O0", "--cudagraph-capture-sizes", "1", "2", "4", "--max-model-len",
                       "-1" if version == "0.33.0" else "4096")
    assert rc == 0, err
    rec = json.loads(out)["recommended"]
    level = {"0.33.0": (0, None), "0.11.1": (None, 0), "0.11.0": (None, 0)}[version]
    conf = {"0.33.0": None, "0.11.1": {"mode": 0},
            "0.11.0": {"cudagraph_capture_sizes": [1, 2, 4], "level": 0}}[version]
    again = parse_vllm_command(rec["command"]).settings
    assert (again.optimization_level, again.compilation_mode) == level
    assert again.cudagraph_capture_sizes == (1, 2, 4)
    assert rec["command"].count("-O") == (version == "0.33.0")
    assert rec["plan"]["per_gpu"]["cuda_graph_bytes"] == 0
    doc = yaml.safe_load(rec["config_yaml"])
    assert json.loads(doc.get("compilation-config", "null")) == conf
    assert doc.get("cudagraph-capture-sizes") == (None if version == "0.11.0" else [1, 2, 4])
    assert ("optimization-level" in doc) == (version == "0.33.0")
    doc.pop("model")
    from_yaml = settings_from_mapping(doc)
    assert from_yaml.cudagraph_capture_sizes == (1, 2, 4)
    assert (from_yaml.optimization_level, from_yaml.compilation_mode) == level
    if version == "0.33.0":
        assert doc["max-model-len"] == -1 or doc["max-model-len"] == "auto"


def test_70b_on_one_h100_says_needs_2_gpus(capsys):
    rc, out, _ = run(capsys, "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "H100",
                     "--workload", "p99=4000", "--offline")
    assert rc == 0
    assert "needs 2 GPUs" in out and "On the 1 GPU(s) given" in out


def test_plots(capsys, tmp_path):
    html = tmp_path / "curve.html"
    rc, out, err = run(capsys, MODEL, "--gpu", "L4", "--workload", "p99=4000", "--offline",
                       "--plot", str(html))
    assert rc == 0, err
    text = html.read_text()
    assert "<svg" in text and "<script" not in text and "http://www.w3.org/2000/svg" in text
    assert "src=" not in text
    png = tmp_path / "curve.png"
    pytest.importorskip("matplotlib")
    rc, out, err = run(capsys, MODEL, "--gpu", "L4", "--workload", "p99=4000", "--offline",
                       "--plot", str(png))
    assert rc == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_workload_file(capsys, tmp_path):
    f = tmp_path / "w.jsonl"
    f.write_text("\n".join(json.dumps({"prompt_tokens": 100 + i, "output_tokens": 200})
                           for i in range(100)))
    rc, out, err = run(capsys, MODEL, "--gpu", "L4", "--workload-file", str(f), "--json",
                       "--offline")
    assert rc == 0, err
    assert json.loads(out)["request"]["workload"]["p99_tokens"] == 398


# ---- bad input: exit 2, one line, no traceback -------------------------------------------
@pytest.mark.parametrize("argv,needle", [
    ([], "no model given"),
    ([MODEL, "--gpu", "H100,H900"], "unknown GPU 'H900'"),
    ([MODEL, "--gpu", "H100", "--gpu", "RTX-9999"], "unknown GPU 'RTX-9999'"),
    ([MODEL, "--gpu", "H100:0"], "invalid GPU count"),
    ([MODEL, "--gpu", "H100", "--gpu", "L4", "--num-gpus", "3"], "contradicts"),
    ([MODEL, "--gpu", "H100", "--num-gpus", "1025"], "<= 1,024"),
    ([MODEL, "--workload", "p99=abc"], "not a token count"),
    ([MODEL, "--workload", "p99=100", "--workload-file", "x"], "contradict"),
    ([MODEL, "--target-kv-usage", "1.5"], "0 < F <= 1"),
    ([MODEL, "--concurrency", "0"], ">= 1"),
    ([MODEL, "--gpu-free-gib", "1,2"], "free-memory values"),
    ([MODEL, "--gpu", "L4", "--gpu-free-gib", "99"], "more than"),
    ([MODEL, "--max-modle-len", "4096"], "Did you mean --max-model-len"),
    ([MODEL, "-tp", "3"], "divisible by tensor parallel size"),
    ([MODEL, "--workload", "p99=10000000"], "longer than the model's maximum"),
    ([MODEL, "--plot", "x.svg"], ".png or .html"),
    ([MODEL, "--gpu-memory-gib", "1e308"], "<= 1,048,576"),
    ([MODEL, "--gpu-free-gib", "1e308"], "<= 1,048,576"),
    ([MODEL, "--headroom-gib", "1e308"], "<= 1,048,576"),
    (["--", "vllm serve " + MODEL + " --json"], "--json is vramguard's option, not vLLM's"),
])
def test_bad_input_exit_2(capsys, argv, needle):
    rc, out, err = run(capsys, *argv, "--offline")
    assert rc == 2 and out == "", (out, err)
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("vramguard tune: error: ")


def test_empty_workload_file(capsys, tmp_path):
    f = tmp_path / "empty.jsonl"
    f.write_text("\n")
    rc, _, err = run(capsys, MODEL, "--workload-file", str(f), "--offline")
    assert rc == 2 and "empty" in err and str(f) in err and err.count("\n") == 1


def test_malformed_workload_file_names_the_line(capsys, tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"prompt_tokens": 10}\n{"prompt_tokens": 20}\n{oops\n')
    rc, _, err = run(capsys, MODEL, "--workload-file", str(f), "--offline")
    assert rc == 2 and f"{f}:3" in err and err.count("\n") == 1


def test_recommended_command_passes_vramguard_plan(capsys):
    """The printed command, pasted into `vramguard plan`, is predicted to start."""
    import shlex
    rc, out, _ = run(capsys, MODEL, "--gpu", "RTX-3090", "--workload", "p99=6000", "--json",
                     "--offline")
    assert rc == 0
    command = json.loads(out)["recommended"]["command"]
    rc = main(["plan", "--gpu", "RTX-3090", "--json", "--offline", "--", *shlex.split(command)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["startup"]["ok"] is True and not doc["startup"]["risks"]
    assert doc["settings"]["max_model_len"] == 6144


def test_the_launchs_vllm_variables_are_planned_with_and_written_back(capsys):
    """A pasted VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 lets --max-model-len pass the derived
    maximum, as in plan; the commands carry the vLLM variables (not others, like a token)."""
    line = ("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 HF_TOKEN=hf_x vllm serve "
            f"{MODEL} --max-model-len 65536")
    rc, out, _ = run(capsys, "--gpu", "H100", "--offline", "--json", "--", line)
    assert rc == 0
    doc = json.loads(out)
    command = doc["recommended"]["command"]
    assert command.startswith(f"VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve {MODEL} ")
    assert "hf_x" not in out and "--max-model-len 65536" in command
    assert doc["recommended"]["config_yaml"].startswith(
        "# VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve")
    assert all(o["command"].startswith("VLLM_ALLOW_LONG") for o in doc["options"])
    rc, _, err = run(capsys, "--gpu", "H100", "--offline", "--", line.split(" ", 2)[2])
    assert rc == 2 and "is greater than the derived max_model_len" in err
