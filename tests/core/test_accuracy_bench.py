"""The accuracy benchmark runs on the repo's copy of the corpus and meets its targets."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "accuracy.py"

pytest.importorskip("vramguard.sources.config")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("vg_accuracy_bench", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def rows(bench):
    gpus = {g["short_name"]: g for g in bench.load_jsonl(bench.DATA / "gpus.jsonl")}
    cases = bench.load_jsonl(bench.DATA / "cases.jsonl")
    return [bench.run_case(c, gpus, use_free=True, default_version="0.33.0") for c in cases]


def test_summary_targets(bench, rows):
    s = bench.summarize(rows)
    assert s["cases"] >= 90
    assert s["median_abs_dkv_gib"] <= 0.3
    assert s["median_improvement_x"] >= 5
    assert s["outcome_accuracy"] >= 0.8


def test_flags_are_read_generically(bench):
    s = bench.settings_from_flags(
        "vllm serve {'model': 'm', 'max_model_len': 8192, 'gpu_memory_utilization': 0.95}; "
        "--kv-cache-dtype fp8 --enforce-eager num_gpu_blocks_override=2048 -tp 2", bench.Settings())
    assert s.max_model_len == 8192 and s.gpu_memory_utilization == 0.95
    assert s.kv_cache_dtype == "fp8" and s.enforce_eager
    assert s.num_gpu_blocks_override == 2048 and s.tensor_parallel_size == 2


def test_well_measured_case_is_close(rows):
    row = next(r for r in rows if r["id"] == "llmdp-v0190-h100-llama31-8b-tp1")
    assert abs(row["predicted_kv_gib"] - row["reported_kv_gib"]) < 0.3


def test_flags_in_prose_brackets_and_lora_slots(bench):
    s = bench.settings_from_flags("LoRA enabled with 1 adapter slot (--max-loras 1), "
                                  "`--enforce-eager`; rank `--max-lora-rank 64`", bench.Settings())
    assert s.max_loras == 1 and s.max_lora_rank == 64 and s.enforce_eager
    assert s.enable_lora      # sizing LoRA slots means serving LoRA
    assert not bench.settings_from_flags("--max-num-seqs 8", bench.Settings()).enable_lora


def test_env_assignments_are_read(bench):
    env = bench.env_from_text("--gpu-memory-utilization 0.12 with "
                              "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0, NCCL_P2P_DISABLE=1")
    assert env == {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}


def test_layout_at_the_logged_pool(bench, rows):
    # the predicted pool is larger than the logged one here (moved into the activation) ...
    row = next(r for r in rows if r["id"] == "llmdp-v0190-h100-llama31-8b-tp1")
    assert abs(row["layout"]["tokens"]["rel_error"]) < 0.001
    # ... and smaller here (moved out of the weights): both land on the logged pool
    row = next(r for r in rows if r["id"] == "dennislee-qwen2-7b-2xa100-40g-tp2-u05")
    assert row["predicted_kv_gib"] < row["reported_kv_gib"] - 0.5
    assert abs(row["layout"]["num_blocks"]["rel_error"]) < 0.001
    s = bench.summarize(rows)
    assert s["layout_cases"] >= 30 and s["layout_median_abs_rel_error"] < 0.01
    # failed startups and pipeline-parallel runs are left out of this check
    assert all(r.get("layout") is None for r in rows
               if r["outcome"] != "started" or "-pp" in r["id"])


def test_kv_compared_on_the_rank_whose_line_the_excerpt_shows(bench):
    """Each worker prints its own "Available KV cache memory": a `Worker_PP1` line is
    compared with stage 1's ledger, an unattributed figure with the tightest rank."""
    from vramguard.core.gpu_catalog import lookup_gpu
    from vramguard.core.planner import plan
    from vramguard.core.settings import Settings
    from vramguard.sources.resolve import load_model_spec
    s = Settings(pipeline_parallel_size=2, user_set=frozenset({"pipeline_parallel_size"}))
    p = plan(load_model_spec("meta-llama/Llama-3.1-8B-Instruct", offline=True), s,
             lookup_gpu("H100-80GB"))
    first, last = p.ledgers[0], p.ledgers[-1]
    assert last.kv_cache.value_bytes < first.kv_cache.value_bytes   # LM head + sampler
    line = "INFO [gpu_worker.py:436] Available KV cache memory: 66.54 GiB"
    for excerpt, want in ((f"(Worker_PP0 pid=442) {line}", first),
                          (f"(Worker_PP1_TP0 pid=9) {line}", last),
                          (line, p.tightest), ("", p.tightest)):
        assert bench.reported_rank({"raw_log_excerpt": excerpt}, p) is want


def test_another_corpus_reads_its_own_configs_and_gpus(bench, tmp_path):
    """`--cases other/cases.jsonl`: other/configs and other/gpus.jsonl first, then the project's
    copies, then the embedded catalog by Hugging Face id."""
    import json
    import shutil
    src = json.loads(next(l for l in (bench.DATA / "cases.jsonl").read_text().splitlines()
                          if '"llmdp-v0190-h100-llama31-8b-tp1"' in l))
    own = dict(src, id="own-config", model_config="my__renamed-model")
    (tmp_path / "configs" / "my__renamed-model").mkdir(parents=True)
    shutil.copy(bench.DATA / "configs" / src["model_config"] / "config.json",
                tmp_path / "configs" / "my__renamed-model" / "config.json")
    catalog = dict(src, id="catalog-only", model_config="Qwen__Qwen2.5-7B-Instruct-absent",
                   model="meta-llama/Llama-3.1-8B-Instruct")
    unknown = dict(src, id="unknown", model_config="nobody__nothing", model="prose model")
    (tmp_path / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in (own, catalog,
                                                                           unknown)) + "\n")
    shutil.copy(bench.DATA / "gpus.jsonl", tmp_path / "gpus.jsonl")
    rows = {r["id"]: r for r in _json_rows(bench, ["--cases", str(tmp_path / "cases.jsonl")])}
    assert rows["own-config"]["predicted_kv_gib"] == pytest.approx(58.08, abs=0.01)
    assert rows["catalog-only"]["predicted_kv_gib"] == pytest.approx(58.08, abs=0.05)
    assert rows["unknown"]["error"] == "no model config"


def _json_rows(bench, argv):
    import contextlib
    import io
    import json
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bench.main(argv + ["--json"])
    return json.loads(out.getvalue())["cases"]


def test_heldout_set_is_complete_and_runs(bench):
    """bench/heldout (81 startups outside the corpus) keeps every case plannable: its own
    configs/gpus are read, nothing is 'no model config' / 'unknown GPU'."""
    import json
    heldout = bench.ROOT / "bench" / "heldout" / "cases.jsonl"
    rows = _json_rows(bench, ["--cases", str(heldout)])
    assert len(rows) == 81
    assert not [r["id"] for r in rows if r["error"] in ("no model config", "unknown GPU")]
    corpus = {json.loads(l)["source"] for l in (bench.DATA / "cases.jsonl").read_text().splitlines()}
    assert not [r for r in bench.load_jsonl(heldout) if r["source"] in corpus]


def test_config_overrides_and_env_in_the_flags(bench):
    """A case whose launch carried `--hf-overrides` (YaRN beyond the config's positions) and
    VLLM_ALLOW_LONG_MAX_MODEL_LEN is planned with both, as `vramguard plan` plans the pasted
    command; without them vLLM's own length check rejects it."""
    import json
    src = json.loads(next(l for l in (bench.DATA / "cases.jsonl").read_text().splitlines()
                          if '"llmdp-v0190-h100-llama31-8b-tp1"' in l))
    gpus = {g["short_name"]: g for g in bench.load_jsonl(bench.DATA / "gpus.jsonl")}
    yarn = ("--hf-overrides '{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
            "\"original_max_position_embeddings\": 131072}}'")
    assert bench.config_overrides_from_flags(f"vllm serve m {yarn} --port 1") == {
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                         "original_max_position_embeddings": 131072}}
    assert bench.config_overrides_from_flags("--rope-scaling yarn factor 4") == {}   # not JSON

    def row(flags):
        case = dict(src, id="long", max_model_len=262144, other_flags=flags)
        return bench.run_case(case, gpus, use_free=True, default_version="0.33.0")
    assert row("")["failure"] == "usage_error"
    assert row(yarn)["failure"] != "usage_error"
    assert row("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")["failure"] != "usage_error"


def test_targets_line_says_met_and_not_met(bench):
    line = bench.targets_line({"median_abs_dkv_gib": 0.25, "p90_abs_dkv_gib": 2.0,
                               "outcome_accuracy": 0.9, "median_improvement_x": None})
    assert line == ("targets: median |dKV| <= 0.3 GiB met (0.25); p90 |dKV| <= 1.5 GiB NOT met "
                    "(2.0); outcome >= 90% met (0.9); median >= 5x better than naive NOT met "
                    "(None)")


def test_a_declared_method_is_not_passed_as_a_flag(bench):
    """A case's `quantization` names the served checkpoint's method: `--quantization` only
    where the config (or the emulated checkpoint config) does not declare it."""
    case = {"id": "x", "model_config": "microsoft__phi-4", "quantization": "gptq 4-bit"}
    spec = bench.spec_for(case)
    assert spec.quant.method == "gptq" and spec.quant.bits == 4
    assert bench.settings_for(case, spec).quantization is None
    assert bench.settings_for(case).quantization == "gptq"
