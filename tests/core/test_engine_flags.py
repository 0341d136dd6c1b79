"""Engine flags by release (core/engine_flags.py, generated from every release's
vllm/engine/arg_utils.py by scripts/vllm_engine_flags.py): argparse's refusal of a flag that
vramguard reads but does not model, outside the releases that have it."""

import importlib.util
import sys
from pathlib import Path

import pytest

from vramguard.cli import main
from vramguard.core.engine_flags import ENGINE_FLAGS, EXAMINED
from vramguard.core.validation import check_engine_flags
from vramguard.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
GONE = (("--disable-log-requests", ("--disable-log-requests",)),)


def test_a_flag_gone_from_the_release_is_refused_with_what_to_do():
    check_engine_flags(GONE, "0.16.0")
    with pytest.raises(UsageError) as e:
        check_engine_flags(GONE, "0.17.0")
    assert e.value.what == "vllm serve: error: unrecognized arguments: --disable-log-requests"
    assert e.value.fix.startswith("vLLM 0.17.0 has no such flag (0.4.0-0.16.0): drop it: "
                                  "requests are not logged by default")


@pytest.mark.parametrize("args,version,refused", [
    ((("--model-impl", ("--model-impl", "transformers")),), "0.7.1", "(0.7.2 on): drop it"),
    ((("--model-impl", ("--model-impl=transformers",)),), "0.7.2", None),
    ((("--scheduling-policy", ("--scheduling-policy", "priority")),), "0.6.2", "(0.6.3 on)"),
    ((("--guided-decoding-backend", ("--guided-decoding-backend", "xgrammar")),), "0.12.0",
     "(0.4.1-0.11.2)"),
    ((("--port", ("--port", "8000")),), "0.4.0", None),       # a front-end flag: not judged
    (GONE, "0.40.0", "vLLM 0.40.0 has no such flag"),         # newer: judged as the newest
    (GONE, "0.17.1.dev3+gabc", None),                         # a development build
    (GONE, "0.3.3", None),                                    # older than the oldest examined
])
def test_engine_flags_by_release(args, version, refused):
    if refused is None:
        check_engine_flags(args, version)
        return
    with pytest.raises(UsageError) as e:
        check_engine_flags(args, version)
    assert e.value.what == ("vllm serve: error: unrecognized arguments: "
                            + " ".join(args[0][1]))
    assert refused in e.value.fix


def test_the_llm_class_has_no_argparse():
    check_engine_flags(GONE, "0.33.0", entrypoint="llm")


def test_the_table_spans_and_the_flags_vramguard_models_elsewhere():
    assert EXAMINED[0] == "0.4.0" and EXAMINED[-1] == "0.33.0"
    assert ENGINE_FLAGS["--async-scheduling"] == "0.10.0-"
    assert ENGINE_FLAGS["--swap-space"] == "0.4.0-0.17.1"       # = FLAG_RELEASES' span
    from vramguard.core.rules_changes import FLAG_RELEASES
    for flag, first, last in FLAG_RELEASES.values():
        if flag in ENGINE_FLAGS and "," not in ENGINE_FLAGS[flag]:
            assert ENGINE_FLAGS[flag] == f"{first}-{last or ''}", flag


def test_plan_and_tune_refuse_before_planning(capsys):
    for cmd in ("plan", "tune"):
        rc = main([cmd, "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--offline",
                   "--vllm-version", "0.20.0", "--disable-log-requests"])
        out, err = capsys.readouterr()
        assert rc == 2 and "unrecognized arguments: --disable-log-requests" in err
        assert err.count("\n") == 1 and "Traceback" not in err


def test_generator_on_a_synthetic_tree(tmp_path):
    spec = importlib.util.spec_from_file_location("vllm_engine_flags",
                                                  ROOT / "scripts" / "vllm_engine_flags.py")
    gen = importlib.util.module_from_spec(spec)
    sys.modules["vllm_engine_flags"] = gen
    spec.loader.exec_module(gen)
    au = tmp_path / "au"
    au.mkdir()
    (au / "0.1.0.py").write_text('parser.add_argument("--a")\nparser.add_argument("--gone")\n')
    (au / "0.2.0.py").write_text('parser.add_argument("--a")\nparser.add_argument("--new")\n'
                                 'parser.add_argument("--moved")\n')
    (au / "0.2.0.post1.py").write_text('parser.add_argument("--post")\n')
    (au / "0.3.0.py").write_text('parser.add_argument("--a")\nparser.add_argument("--gone")\n')
    front = tmp_path / "front" / "vllm" / "entrypoints" / "openai"
    front.mkdir(parents=True)
    (front / "cli_args.py").write_text('parser.add_argument("--moved")\n')
    text = gen.render(gen.releases(au), gen.frontend_flags([tmp_path / "front"]))
    ns: dict = {}
    exec(text, ns)
    assert ns["EXAMINED"] == ("0.1.0", "0.2.0", "0.3.0")
    assert ns["ENGINE_FLAGS"] == {"--a": "0.1.0-", "--gone": "0.1.0-0.1.0,0.3.0-",
                                  "--new": "0.2.0-0.2.0", "--post": "0.2.0-0.2.0"}


def test_spelling_and_flag_tables_agree_with_arg_utils():
    """The hand-kept release spans of the modelled engine flags (FLAG_RELEASES,
    SPELLING_RELEASES) are those of the releases' arg_utils.py."""
    from vramguard.core.rules_changes import SPELLING_RELEASES
    for flag, (first, last) in SPELLING_RELEASES.items():
        if flag in ENGINE_FLAGS:
            assert ENGINE_FLAGS[flag] == f"{first}-{last or ''}", flag
