"""`vramguard table`: size labels, the three formats, numbers checked by hand, bad input."""

import csv
import io
import json

import pytest

from vramguard.cli import main
from vramguard.core.table import SIZE_MODELS, model_for_label
from vramguard.errors import UsageError
from vramguard.sources import catalog


def run(capsys, *argv):
    rc = main(["table", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_every_size_label_is_a_catalog_model():
    for label, model in SIZE_MODELS.items():
        assert catalog.get(model) is not None, (label, model)
    assert model_for_label("7b") == SIZE_MODELS["7B"]
    assert model_for_label("org/x") == "org/x"
    with pytest.raises(UsageError, match="no representative model"):
        model_for_label("11B")


def test_json_numbers_by_hand(capsys):
    rc, out, err = run(capsys, "--models", "8B", "--gpus", "L4,H100", "--max-model-len", "4096",
                       "--concurrency", "32", "--format", "json", "--offline")
    assert rc == 0, err
    doc = json.loads(out)
    row = doc["rows"][0]
    assert row["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    # 32 layers x 2 (K,V) x 8 KV heads x 128 x 2 bytes = 131072 B/token
    assert row["kv_bytes_per_token"] == 131072
    assert row["kv_per_sequence_bytes"] == 131072 * 4096          # 512 MiB
    assert row["kv_concurrent_bytes"] == 32 * 131072 * 4096       # 16 GiB
    assert row["total_bytes"] == (row["weights_bytes"] + row["activation_bytes"]
                                  + row["non_torch_bytes"] + row["cuda_graph_bytes"]
                                  + row["kv_concurrent_bytes"] + row["context_bytes"])
    assert 14.5 * 2**30 < row["weights_bytes"] < 15.5 * 2**30    # 8.03B x 2 bytes
    fits = {f["gpu"]: f for f in row["fits"]}
    assert fits["H100-80GB"]["tensor_parallel_size"] == 1
    assert fits["H100-80GB"]["max_concurrency"] >= 32
    assert fits["L4"]["tensor_parallel_size"] in (2, 4)            # 15 GiB + 16 GiB > 22 GiB


def test_markdown(capsys):
    rc, out, _ = run(capsys, "--models", "1B,70B", "--gpus", "H100", "--offline")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("| model | params | weights | KV/token")
    assert lines[1].startswith("|---|")
    assert "1B (meta-llama/Llama-3.2-1B-Instruct)" in out and "| TP1 (" in out
    assert "70B (meta-llama/Llama-3.1-70B-Instruct)" in out
    assert "smallest tensor-parallel size" in out


def test_csv_and_a_model_id(capsys):
    rc, out, _ = run(capsys, "--models", "Qwen/Qwen2.5-0.5B,405B", "--gpus", "A100-80GB",
                     "--format", "csv", "--kv-cache-dtype", "fp8", "--offline")
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0]["model"] == "Qwen/Qwen2.5-0.5B" and rows[0]["A100-80GB_tp"] == "1"
    assert rows[1]["label"] == "405B" and rows[1]["A100-80GB_tp"] == ""     # not on 8 x 80 GB
    assert int(rows[1]["kv_per_sequence_bytes"]) > 0


def test_sliding_window_kv_follows_blocks(capsys):
    rc, out, _ = run(capsys, "--models", "google/gemma-2-9b-it", "--gpus", "H100",
                     "--max-model-len", "8192", "--format", "json", "--offline")
    assert rc == 0
    row = json.loads(out)["rows"][0]
    assert row["kv_per_sequence_bytes"] > 0


@pytest.mark.parametrize("argv,needle", [
    (["--models", "9.5B"], "no representative model"),
    (["--gpus", "H100,H900"], "unknown GPU 'H900'"),
    (["--max-model-len", "lots"], "--max-model-len"),
    (["--concurrency", "0"], "--concurrency"),
    (["--kv-cache-dtype", "fp7"], "--kv-cache-dtype"),
    (["--vllm-version", "abc"], "cannot read vLLM version 'abc'"),
    (["--vllm-version", "0.0.1"], "older than 0.4.0"),
    (["--models", "8B", "--max-model-len", "1000000"], None),
])
def test_bad_input(capsys, argv, needle):
    rc, out, err = run(capsys, *argv, "--offline")
    if needle is None:       # a length beyond the model: reported in the row, not fatal
        assert rc == 0 and "error:" in out
        return
    assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_model_vllm_rejects_gets_one_sentence_and_the_fix(capsys):
    rc, out, err = run(capsys, "--models", "Qwen/Qwen2.5-0.5B", "--gpus", "T4",
                       "--max-model-len", "65536", "--format", "json", "--offline")
    assert rc == 0, err
    error = json.loads(out)["rows"][0]["error"]
    assert error.startswith("User-specified max_model_len (65536) is greater than the derived")
    assert error.endswith("Use --max-model-len 32768 or less")
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in error      # the rest is in `vramguard plan`


def test_a_gpu_that_refuses_the_model_is_its_own_cell(capsys):
    """vLLM refuses an FP8-dynamic checkpoint on a V100 and (0.11) a T4: those cells say so
    (the reason in a note), the bytes come from the first GPU that runs it, the row stays."""
    argv = ("--models", "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "--gpus",
            "V100-32GB,T4,A100-80GB", "--max-model-len", "4096", "--concurrency", "8",
            "--vllm-version", "0.11.0", "--offline")
    rc, out, err = run(capsys, *argv, "--format", "json")
    assert rc == 0, err
    row = json.loads(out)["rows"][0]
    assert row["error"] is None and row["bytes_gpu"] == "A100-80GB"
    fits = {f["gpu"]: f for f in row["fits"]}
    assert fits["V100-32GB"]["refused"].startswith(
        "('Quantization scheme is not supported for ', 'the current GPU. Min capability: 80. '")
    assert "vLLM 0.16.0 and newer can" in fits["T4"]["refused"]
    assert fits["A100-80GB"]["refused"] is None and fits["A100-80GB"]["tensor_parallel_size"]
    rc, out, err = run(capsys, *argv)
    assert "(on A100-80GB)" in out and out.count("no (refused: note)") == 2
    assert "Note: RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic on T4: vLLM refuses it:" in out
    rc, out, err = run(capsys, *argv[:3], "V100-32GB", *argv[4:], "--format", "json")
    assert json.loads(out)["rows"][0]["error"].startswith("('Quantization scheme")
