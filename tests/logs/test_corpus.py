"""Every corpus case with a raw_log_excerpt is classified as the hand-written table says."""
import json
from pathlib import Path

import pytest

from vramguard.logs.diagnose import diagnose
from vramguard.logs.parser import parse_text

from .conftest import DATA, load_cases

EXPECT = {k: v for k, v in json.loads((DATA / "corpus_expectations.json").read_text()).items()
          if not k.startswith("_")}
CASES = [c for c in load_cases() if c.get("raw_log_excerpt")]


def test_table_covers_every_case():
    assert {c["id"] for c in CASES} == set(EXPECT)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case_classified(case):
    status, failure, phase, _why = EXPECT[case["id"]]
    d = diagnose(parse_text(case["raw_log_excerpt"]))
    assert (d.status, d.failure) == (status, failure)
    if phase:
        assert d.phase == phase
    if case["outcome"] == "started":
        assert d.failure is None          # never invent a failure for a good startup


# reported field -> Extracted attribute. Where the excerpt carries the number, it must match.
NUMBERS = {"weights_gib": "weights_gib", "kv_cache_tokens": "kv_cache_tokens",
           "max_concurrency": "max_concurrency", "num_gpu_blocks": "num_gpu_blocks",
           "num_cpu_blocks": "num_cpu_blocks", "non_torch_gib": "non_torch_gib",
           "cuda_graph_estimate_gib": "cuda_graph_estimate_gib"}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case_numbers(case):
    ex = parse_text(case["raw_log_excerpt"])
    rep = case["reported"]
    for field, attr in NUMBERS.items():
        got, want = getattr(ex, attr), rep.get(field)
        if got is not None and want is not None:
            assert got == pytest.approx(want, abs=0.011), field
    if rep.get("kv_cache_gib") is not None and ex.kv_pool_gib is not None:
        assert ex.kv_pool_gib == pytest.approx(rep["kv_cache_gib"], abs=0.011)


def test_numbers_are_found_where_printed():
    """Coverage: the parser finds the headline numbers in most excerpts that print them."""
    found = {"weights": 0, "kv": 0, "tokens": 0, "conc": 0}
    for c in CASES:
        ex, text = parse_text(c["raw_log_excerpt"]), c["raw_log_excerpt"]
        found["weights"] += ex.weights_gib is not None
        found["kv"] += ex.kv_pool_gib is not None
        found["tokens"] += ex.kv_cache_tokens is not None and "KV cache size" in text
        found["conc"] += ex.max_concurrency is not None
    assert found["weights"] >= 40 and found["kv"] >= 45
    assert found["tokens"] >= 20 and found["conc"] >= 38


HELDOUT = Path(__file__).resolve().parents[2] / "bench" / "heldout" / "cases.jsonl"
HELDOUT_CASES = [c for c in map(json.loads, HELDOUT.read_text(encoding="utf-8").splitlines())
                 if c.get("raw_log_excerpt")]


@pytest.mark.parametrize("case", HELDOUT_CASES, ids=[c["id"] for c in HELDOUT_CASES])
def test_heldout_case_numbers(case):
    """The held-out startups' excerpts (bench/heldout): where the parser finds a number the
    case reports, they agree. (No outcome check: some excerpts quote a second, failed run.)"""
    test_case_numbers(case)


def test_heldout_block_counts_found():
    """The engine-initialized line (V1 0.9+) gives the block count where it is printed."""
    printed = [c for c in HELDOUT_CASES if "after num_gpu_blocks is" in c["raw_log_excerpt"]]
    assert len(printed) >= 2
    for c in printed:
        assert parse_text(c["raw_log_excerpt"]).num_gpu_blocks == c["reported"]["num_gpu_blocks"]
