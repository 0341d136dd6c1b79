"""`--workload` token counts that are not finite or absurdly large: a usage error, no crash."""
import pytest

from vramguard.errors import UsageError
from vramguard.sources.workload import parse_workload_spec


@pytest.mark.parametrize("raw,shown", [("inf", "inf"), ("-inf", "-inf"), ("1e400", "1e400"),
                                       ("infk", "inf")])
def test_non_finite_counts_are_not_token_counts(raw, shown):
    with pytest.raises(UsageError) as e:
        parse_workload_spec(f"p99={raw}")
    assert e.value.where == "--workload" and e.value.what == f"{shown!r} is not a token count"


def test_huge_finite_count_is_outside_the_range():
    with pytest.raises(UsageError, match="outside 1..100,000,000"):
        parse_workload_spec("p99=1e300")


def test_huge_count_in_a_workload_file_names_its_line(tmp_path):
    from vramguard.sources.workload import read_workload_file
    f = tmp_path / "w.jsonl"
    f.write_text('{"prompt_tokens": 100, "output_tokens": 20}\n'
                 '{"prompt_tokens": 10000000000000000000000000000000000000000, '
                 '"output_tokens": 2}\n')
    with pytest.raises(UsageError) as e:
        read_workload_file(str(f))
    assert e.value.where == f"{f}:2" and "beyond any model's context" in e.value.what
