import json

import pytest

from vramguard.core.workload import Workload
from vramguard.errors import UsageError
from vramguard.sources.workload import parse_workload_spec, read_workload_file


def test_nearest_rank_percentiles():
    w = Workload.from_lengths(list(range(1, 101)))
    assert (w.p50_tokens, w.p90_tokens, w.p99_tokens) == (50, 90, 99)
    assert w.num_requests == 100


def test_spec_with_suffix_and_defaults():
    w = parse_workload_spec("p50=800,p90=2k,p99=6K")
    assert (w.p50_tokens, w.p90_tokens, w.p99_tokens) == (800, 2000, 6144)
    assert parse_workload_spec("p99=4000").p50_tokens == 4000


@pytest.mark.parametrize("bad", ["p99", "p75=3", "p50=9000,p99=10", "p99=-1", "p99=abc", "p50=10"])
def test_bad_specs(bad):
    with pytest.raises(UsageError):
        parse_workload_spec(bad)


def test_jsonl_file(tmp_path):
    f = tmp_path / "w.jsonl"
    f.write_text("\n".join(json.dumps({"prompt_tokens": p, "output_tokens": 100}) for p in range(100, 200)))
    w = read_workload_file(str(f))
    assert w.p99_tokens == 298 and w.num_requests == 100


def test_benchmark_result_file(tmp_path):
    f = tmp_path / "bench.json"
    f.write_text(json.dumps({"input_lens": [100, 200, 300], "output_lens": [10, 20, 30]}))
    assert read_workload_file(str(f)).p99_tokens == 330


def test_malformed_line_names_line_number(tmp_path):
    f = tmp_path / "w.jsonl"
    f.write_text('{"prompt_tokens": 5}\n{oops\n')
    with pytest.raises(UsageError) as exc:
        read_workload_file(str(f))
    assert ":2" in exc.value.line()


def test_empty_file(tmp_path):
    f = tmp_path / "w.jsonl"
    f.write_text("\n")
    with pytest.raises(UsageError, match="empty"):
        read_workload_file(str(f))
