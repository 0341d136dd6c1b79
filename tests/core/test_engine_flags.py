"""Serve flags by release (core/engine_flags.py, generated from every release's
vllm/engine/arg_utils.py and vllm/entrypoints by scripts/vllm_serve_flags.py): argparse's
refusal of a flag that vramguard reads but does not model, outside the releases that have it
(core/parser_flags.py), and the front end's start-up checks of such flags."""

import importlib.util
import sys
from pathlib import Path

import pytest

from vramguard.cli import main
from vramguard.core.engine_flags import ENGINE_FLAGS, EXAMINED, FRONTEND_FLAGS
from vramguard.core.parser_flags import check_parser_flags, flag_releases
from vramguard.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
GONE = (("--disable-log-requests", ("--disable-log-requests",)),)


def test_a_flag_gone_from_the_release_is_refused_with_what_to_do():
    check_parser_flags(GONE, "0.16.0")
    with pytest.raises(UsageError) as e:
        check_parser_flags(GONE, "0.17.0")
    assert e.value.what == "vllm serve: error: unrecognized arguments: --disable-log-requests"
    assert e.value.fix.startswith("vLLM 0.17.0 has no such flag (0.4.0-0.16.0): drop it: "
                                  "requests are not logged by default")


@pytest.mark.parametrize("args,version,refused", [
    ((("--model-impl", ("--model-impl", "transformers")),), "0.7.1", "(0.7.2 on): drop it"),
    ((("--model-impl", ("--model-impl=transformers",)),), "0.7.2", None),
    ((("--scheduling-policy", ("--scheduling-policy", "priority")),), "0.6.2", "(0.6.3 on)"),
    ((("--guided-decoding-backend", ("--guided-decoding-backend", "xgrammar")),), "0.12.0",
     "(0.4.1-0.11.2)"),
    ((("--port", ("--port", "8000")),), "0.4.0", None),       # the front end's, from 0.4.0
    ((("--reasoning-parser", ("--reasoning-parser", "deepseek_r1")),), "0.7.0",
     "(0.7.1 on)"),           # the front end's 0.7.1-0.7.3, then the engine's: one span
    ((("--reasoning-parser", ("--reasoning-parser", "deepseek_r1")),), "0.7.1", None),
    ((("--enable-auto-tool-choice", ("--enable-auto-tool-choice",)),
      ("--tool-call-parser", ("--tool-call-parser", "hermes"))), "0.5.5", "(0.6.0 on)"),
    ((("--served-model-name", ("--served-model-name", "m")),), "0.4.0", None),
    ((("--served-model-name", ("--served-model-name", "m")),), "0.5.0", None),
    ((("--api-server-count", ("-asc", "2")),), "0.9.0", "(0.9.1 on)"),    # as typed
    ((("--engine-use-ray", ("--engine-use-ray",)),), "0.7.0", "(0.4.0-0.6.1)"),
    ((("--no-such-flag", ("--no-such-flag",)),), "0.33.0", None),   # in no table: not judged
    (GONE, "0.40.0", "vLLM 0.40.0 has no such flag"),         # newer: judged as the newest
    (GONE, "0.17.1.dev3+gabc", None),                         # a development build
    (GONE, "0.3.3", None),                                    # older than the oldest examined
])
def test_engine_flags_by_release(args, version, refused):
    err = _refusal(args, version)
    if refused is None:
        assert err is None
        return
    assert err.what == "vllm serve: error: unrecognized arguments: " + " ".join(args[0][1])
    assert refused in err.fix and "or plan with the --vllm-version you run" in err.fix


def _refusal(args, version) -> UsageError | None:
    """check_parser_flags's refusal of `args` on `version` (None: accepted)."""
    try:
        check_parser_flags(args, version)
    except UsageError as exc:
        return exc
    return None


def test_the_llm_class_has_no_argparse():
    check_parser_flags(GONE, "0.33.0", entrypoint="llm")


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


def _generator():
    spec = importlib.util.spec_from_file_location("vllm_serve_flags",
                                                  ROOT / "scripts" / "vllm_serve_flags.py")
    gen = importlib.util.module_from_spec(spec)
    sys.modules["vllm_serve_flags"] = gen
    spec.loader.exec_module(gen)
    return gen


def _release(root, version, arg_utils="", cli_args="", serve="", scripts=""):
    base = root / version / f"vllm-{version}" / "vllm"
    for rel, text in (("engine/arg_utils.py", arg_utils),
                      ("entrypoints/openai/cli_args.py", cli_args),
                      ("entrypoints/cli/serve.py", serve), ("scripts.py", scripts)):
        if text:
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)


def test_generator_on_a_synthetic_tree(tmp_path):
    gen = _generator()
    _release(tmp_path, "0.1.0", arg_utils='p.add_argument("--a")\np.add_argument("--gone")\n'
             'p.add_argument("--moved")\n',
             cli_args='def make_arg_parser(p):\n    p.add_argument("--port", "-P")\n',
             scripts='serve_parser.add_argument("--config")\n'
                     'chat_parser.add_argument("--url")\n')
    _release(tmp_path, "0.2.0", arg_utils='p.add_argument("--a", "-a")\n'
             'p.add_argument("--new")\nmsg = "--mentioned-only"\n',
             cli_args='def make_arg_parser(p):\n    p.add_argument("--moved")\n'
                      'class FrontendArgs:\n    port: int = 8000\n    tool_server: str = ""\n'
                      '    _private: int = 0\n'
                      'def add(p):\n    kw = get_kwargs(FrontendArgs)\n',
             serve='serve_parser.add_argument("--headless", action="store_true")\n')
    _release(tmp_path, "0.2.0.post1", arg_utils='p.add_argument("--post")\n')
    _release(tmp_path, "0.3.0", arg_utils='p.add_argument("--a")\np.add_argument("--gone")\n')
    ns: dict = {}
    exec(gen.render(gen.releases(tmp_path)), ns)
    assert ns["EXAMINED"] == ("0.1.0", "0.2.0", "0.3.0")
    # NOTE: literals for the engine's long flags (a help text's mention widens: the safe side)
    assert ns["ENGINE_FLAGS"] == {"--a": "0.1.0-", "--gone": "0.1.0-0.1.0,0.3.0-",
                                  "--moved": "0.1.0-0.1.0", "--new": "0.2.0-0.2.0",
                                  "--mentioned-only": "0.2.0-0.2.0", "--post": "0.2.0-0.2.0",
                                  "-a": "0.2.0-0.2.0"}
    # NOTE: the serve subparser's flags only (not `chat`'s --url); dataclass fields from 0.2.0
    assert ns["FRONTEND_FLAGS"] == {"--port": "0.1.0-0.2.0", "-P": "0.1.0-0.1.0",
                                    "--config": "0.1.0-0.1.0", "--moved": "0.2.0-0.2.0",
                                    "--tool-server": "0.2.0-0.2.0", "--headless": "0.2.0-0.2.0"}


def test_a_moved_flag_is_one_span_over_both_tables():
    assert FRONTEND_FLAGS["--reasoning-parser"] == "0.7.1-0.7.3"
    assert ENGINE_FLAGS["--reasoning-parser"] == "0.8.0-"
    assert flag_releases("--reasoning-parser") == [("0.7.1", None)]
    assert flag_releases("--served-model-name") == [("0.4.0", None)]
    assert flag_releases("--no-such-flag") == []


def test_every_flag_of_every_release_is_known_to_the_scanner():
    """A flag some release's serve parser has is never an "unknown flag" (its release is
    judged instead)."""
    from vramguard.sources.vllm_scan import is_known_flag
    # NOTE: -O is read apart (-O3, -O.level=3); --help is argparse's own
    missing = sorted(f for f in set(ENGINE_FLAGS) | set(FRONTEND_FLAGS)
                     if not is_known_flag(f) and f not in ("-O", "--help"))
    assert missing == []


@pytest.mark.parametrize("args,version,what", [
    ((("--enable-auto-tool-choice", ("--enable-auto-tool-choice",)),), "0.6.0",
     "Error: --enable-auto-tool-choice requires --tool-call-parser"),
    ((("--enable-log-outputs", ("--enable-log-outputs",)),), "0.11.0",
     "Error: --enable-log-outputs requires --enable-log-requests"),
    ((("--enable-log-outputs", ("--enable-log-outputs",)),
      ("--enable-log-requests", ("--enable-log-requests",))), "0.11.0", None),
    ((("--enable-log-outputs", ("--enable-log-outputs",)),), "0.10.1", None),   # not yet
    ((("--enable-auto-tool-choice", ("--enable-auto-tool-choice",)),
      ("--tool-call-parser", ("--tool-call-parser=hermes",))), "0.33.0", None),
])
def test_the_front_end_start_up_checks(args, version, what):
    err = _refusal(args, version)
    assert (err.what if err else None) == what
    assert err is None or err.fix.startswith("add --")


def test_a_pasted_launch_with_front_end_flags(capsys):
    rc = main(["plan", "--gpu", "H100", "--offline", "--vllm-version", "0.6.0", "--", "vllm",
               "serve", "Qwen/Qwen2.5-7B-Instruct", "--reasoning-parser", "deepseek_r1"])
    err = capsys.readouterr().err
    assert rc == 2 and "unrecognized arguments: --reasoning-parser deepseek_r1" in err
    assert main(["plan", "--gpu", "H100", "--offline", "--", "vllm", "serve",
                 "Qwen/Qwen2.5-7B-Instruct", "-asc", "2", "-dpl", "1"]) == 0
    rc = main(["plan", "--gpu", "H100", "--offline", "--vllm-version", "0.10.0", "--", "vllm",
               "serve", "Qwen/Qwen3-30B-A3B", "-tp", "2", "-ep"])
    err = capsys.readouterr().err
    assert rc == 2 and "unrecognized arguments: -ep" in err and "--enable-expert-parallel" in err


def test_spelling_and_flag_tables_agree_with_arg_utils():
    """The hand-kept release spans of the modelled engine flags (FLAG_RELEASES,
    SPELLING_RELEASES) are those of the releases' arg_utils.py (-O from 0.12 is
    FlexibleArgumentParser's: the optimization level, not an add_argument option)."""
    from vramguard.core.rules_changes import SPELLING_RELEASES
    for flag, (first, last) in SPELLING_RELEASES.items():
        if flag in ENGINE_FLAGS and flag != "-O":
            assert ENGINE_FLAGS[flag] == f"{first}-{last or ''}", flag
    assert ENGINE_FLAGS["-O"] == "0.6.5-0.11.2"


@pytest.mark.parametrize("launcher,positional,version,what", [
    ("vllm serve", False, "0.6.0",
     "vllm serve: error: the following arguments are required: model_tag"),
    ("vllm serve", False, "0.8.2",
     "vllm serve: error: the following arguments are required: model_tag"),
    ("vllm serve", False, "0.8.3", None),             # model_tag optional from 0.8.3
    ("vllm serve", True, "0.5.2", None),
    ("vllm serve", True, "0.5.1", "vLLM 0.5.1 has no `vllm serve` command (the vllm command "
                                  "is new in 0.5.2)"),
    ("python -m vllm.entrypoints.openai.api_server", False, "0.4.0", None),
    ("vllm serve", False, "0.6.4.dev12+gabc", None),  # a development build: not judged
])
def test_vllm_serve_by_release(launcher, positional, version, what):
    from vramguard.core.parser_flags import check_launcher
    if what is None:
        check_launcher(launcher, positional, version)
        return
    with pytest.raises(UsageError) as e:
        check_launcher(launcher, positional, version)
    assert e.value.what == what


def test_a_pasted_serve_with_only_model_flag_on_an_old_release(capsys):
    rc = main(["plan", "--gpu", "H100", "--offline", "--vllm-version", "0.6.0", "--", "vllm",
               "serve", "--model", "Qwen/Qwen2.5-7B-Instruct"])
    err = capsys.readouterr().err
    assert rc == 2 and "the following arguments are required: model_tag" in err
    assert err.count("vllm serve: error") == 1
