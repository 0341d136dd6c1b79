"""The shared splitter of own options / vLLM flags / pasted line (commands/_options.py) and
`sources.vllm_args.command_from_tokens`, which turns the split into a VllmCommand."""

import pytest

from vramguard.commands._options import flag_name, split_options
from vramguard.errors import UsageError
from vramguard.sources.vllm_args import command_from_tokens

BOOL = ("--json", "--offline")
VALUE = ("--gpu", "--vllm-version")


def split(argv, **kw):
    return split_options(argv, bool_flags=BOOL, value_flags=VALUE, **kw)


def test_own_options_and_vllm_tokens_in_order():
    s = split(["m", "--gpu", "A100", "-tp", "2", "--json", "--vllm_version=0.9.2",
               "--max-model-len", "8k"])
    assert s.values == {"--gpu": "A100", "--vllm-version": "0.9.2"}
    assert s.flags == {"--json"} and s.on("--json") and not s.on("--offline")
    assert s.get("--gpu") == "A100" and s.get("--engine", "v1") == "v1"
    assert s.vllm_tokens == ["m", "-tp", "2", "--max-model-len", "8k"]
    assert s.pasted is None and s.help is False


def test_value_forms_and_last_one_wins():
    s = split(["--gpu=L4", "--gpu", "A100", "--gpu-memory-gib", "-3"])
    assert s.values == {"--gpu": "A100"}
    # a value may start with one dash (a negative number), not with two
    assert s.vllm_tokens == ["--gpu-memory-gib", "-3"]
    assert split(["--gpu", "-3"]).get("--gpu") == "-3"


def test_repeatable_collects_a_list():
    s = split(["--gpu", "H100:2", "m", "--gpu=L4"], repeatable=("--gpu",))
    assert s.values["--gpu"] == ["H100:2", "L4"] and s.vllm_tokens == ["m"]
    assert "--gpu" not in split(["m"], repeatable=("--gpu",)).values


def test_dashdash_verbatim_by_default():
    s = split(["--gpu", "L4", "--", "vllm", "serve", "m", "--json", "-h", "--"])
    assert s.pasted == ["vllm", "serve", "m", "--json", "-h", "--"]
    assert s.flags == set() and s.help is False
    assert split(["--"]).pasted == []


def test_own_options_after_dashdash():
    s = split(["-tp", "2", "--", "vllm serve m --port 80", "--json", "--gpu", "L4", "--",
               "-x"], own_after_dashdash=True)
    assert s.pasted == ["vllm serve m --port 80", "--", "-x"]
    assert s.vllm_tokens == ["-tp", "2"]
    assert s.on("--json") and s.get("--gpu") == "L4"
    assert split(["--", "--help"], own_after_dashdash=True).help is True


def test_help_anywhere():
    assert split(["m", "-h"]).help and split(["--help", "--json"]).help


@pytest.mark.parametrize("argv,where,needle", [
    (["--json=yes"], "--json", "takes no value"),
    (["--offline=1", "m"], "--offline", "takes no value"),
    (["m", "--gpu"], "--gpu", "expected a value after it"),
    (["--gpu", "--json"], "--gpu", "expected a value after it"),
    (["--gpu", "--"], "--gpu", "expected a value after it"),
])
def test_errors_are_one_line_usage_errors(argv, where, needle):
    with pytest.raises(UsageError) as exc:
        split(argv)
    assert exc.value.where == where and needle in exc.value.line()
    assert "\n" not in exc.value.line()


def test_flag_name():
    assert flag_name("--max_model_len=8k") == "--max-model-len"
    assert flag_name("-tp") == "-tp" and flag_name("VAR=1") == "VAR"


def test_set_attributes_keeps_defaults():
    class Opts:
        def __init__(self):
            self.gpu, self.vllm_version, self.json, self.offline = [], None, False, False
    o = split(["--gpu", "A", "--json", "m", "--", "x"], repeatable=("--gpu",)).set_attributes(
        Opts())
    assert (o.gpu, o.vllm_version, o.json, o.offline) == (["A"], None, True, False)
    assert (o.vllm_tokens, o.pasted, o.help) == (["m"], ["x"], False)


# ---- command_from_tokens --------------------------------------------------------------
def test_tokens_alone_are_model_and_flags():
    cmd = command_from_tokens(["m", "-tp", "2"])
    assert cmd.model == "m" and cmd.settings.tensor_parallel_size == 2
    assert cmd.launcher == "flags"


@pytest.mark.parametrize("tokens", [
    ["vllm", "serve", "m", "-tp", "2"],
    ["VLLM_USE_V1=1 vllm serve m -tp 2"],
    ["CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve", "m", "-tp", "2"],
    ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "-tp", "2"],
    ["/usr/bin/python3.11", "-m", "vllm.entrypoints.openai.api_server", "--model", "m",
     "-tp", "2"],
])
def test_tokens_that_start_like_a_launch_line(tokens):
    cmd = command_from_tokens(tokens)
    assert cmd.model == "m" and cmd.settings.tensor_parallel_size == 2
    assert cmd.launcher != "flags"


def test_tokens_override_the_pasted_line():
    cmd = command_from_tokens(["--max-model-len", "8192", "--port", "1"],
                              ["VLLM_USE_V1=0", "vllm", "serve", "m", "--max-model-len",
                               "32768", "-tp", "2"])
    assert cmd.model == "m" and cmd.settings.max_model_len == 8192
    assert cmd.settings.tensor_parallel_size == 2 and cmd.engine_hint == "v0"
    assert cmd.launcher == "vllm serve" and "--port" in cmd.ignored
    assert cmd.args[-4:] == ("--max-model-len", "8192", "--port", "1")
    assert command_from_tokens(["other"], ["vllm serve m"]).model == "other"


def test_pasted_alone_and_empty():
    cmd = command_from_tokens([], ["docker", "run", "vllm/vllm-openai:v0.8.5", "--model", "m"])
    assert cmd.model == "m" and cmd.version_hint == "0.8.5"
    assert command_from_tokens([], []).model is None


# ---- the commands: one reading of MODEL + flags / launch lines ---------------------------
@pytest.mark.parametrize("argv", [
    ["VLLM_USE_V1=0 vllm serve m -tp 2"],
    ["uv", "run", "vllm", "serve", "m", "-tp", "2"],
    ["--", "vllm", "serve", "m", "-tp", "2"],
])
def test_tune_and_check_read_launch_lines_like_plan(argv):
    from vramguard.commands import check, plan, tune
    cmds = [plan._command(plan.parse_options(argv)), tune._command(tune.parse_options(argv)),
            check.vllm_command(check.parse_options(argv))]
    assert {(c.model, c.settings.tensor_parallel_size, c.launcher) for c in cmds} == {
        ("m", 2, "vllm serve")}


def test_tune_and_check_load_the_model_with_config_overrides():
    """--hf-overrides reaches the model in tune and check too (not only plan)."""
    from vramguard.commands import check, tune
    argv = ["Qwen/Qwen3-30B-A3B", "--offline", "--hf-overrides",
            '{"max_position_embeddings": 131072}']
    req, _, _, _ = tune.make_request(tune.parse_options(argv))
    assert req.spec.max_len_keys["max_position_embeddings"] == 131072
    prep = check.prepare(check.parse_options(argv), env={})
    assert prep.spec.max_len_keys["max_position_embeddings"] == 131072


def test_command_specific_rules_stay():
    from vramguard.commands import check, plan, run, tune
    assert plan.parse_options(["--", "vllm", "serve", "m", "--json"]).json is True
    with pytest.raises(UsageError, match="unknown flag '--json'"):
        tune._command(tune.parse_options(["--", "vllm", "serve", "m", "--json"]))
    with pytest.raises(UsageError, match="before `--`"):
        check.vllm_command(check.parse_options(["m", "--", "vllm", "serve", "m"]))
    with pytest.raises(UsageError, match="unknown option 'm'"):
        check.parse_options(["m"], value_flags=run.RUN_VALUE, bool_flags=run.RUN_BOOL,
                            allow_tokens=False)
    with pytest.raises(UsageError, match="nothing after `--`"):
        plan._command(plan.parse_options(["--gpu", "L4", "--"]))


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

WORDS = ["m", "-tp", "2", "--max-model-len", "8k", "--json", "--offline", "--gpu", "L4",
         "--gpu=A100", "--vllm_version", "0.9.2", "--", "-h", "x y"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=10), st.booleans())
def test_split_keeps_every_other_token_in_order(argv, after):
    """Whatever the argv: the vLLM tokens and the pasted words are argv's own, in order, and
    no own option reaches them where it is recognised (or a one-line UsageError)."""
    try:
        s = split(argv, own_after_dashdash=after)
    except UsageError as exc:
        assert "\n" not in exc.line()
        return
    rest = s.vllm_tokens + (["--"] + s.pasted if s.pasted is not None else [])
    it = iter(argv)
    assert all(tok in it for tok in rest)             # a subsequence of argv
    if s.pasted is not None and not after:
        assert argv[len(argv) - len(s.pasted):] == s.pasted
    own = set(BOOL + VALUE) | {"-h", "--help"}
    scanned = s.vllm_tokens + ((s.pasted or []) if after else [])
    assert not any(flag_name(t) in own for t in scanned)    # own options never leak to vLLM


def test_an_empty_option_value_is_an_error_not_the_default():
    """`--gpu ''` (e.g. an unset shell variable) would silently plan the default GPU."""
    for argv in (["M", "--gpu", ""], ["M", "--gpu=  "]):
        with pytest.raises(UsageError, match="empty value"):
            split_options(argv, bool_flags=(), value_flags=("--gpu",))
    assert split_options(["M", "--gpu", "L4"], bool_flags=(),
                         value_flags=("--gpu",)).get("--gpu") == "L4"
