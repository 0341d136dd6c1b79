"""Pasted shell snippets down to their vLLM launch (sources/shell_snippet.py): the shapes
found in recipes, READMEs, Makefiles, Dockerfiles and issues (written here, not copied)."""

import pytest

from vramguard.errors import UsageError
from vramguard.sources.shell_snippet import commands, launch_words
from vramguard.sources.vllm_args import parse_vllm_command


def test_exports_and_comments_before_the_command():
    text = ("# Faster MoE kernels on this GPU\n"
            "export VLLM_USE_V1=1\n"
            "export HF_HOME=/data/hf\n"
            "\n"
            "vllm serve org/model -tp 2 \\\n"
            "  --max-model-len 8192   # the longest prompt we serve\n")
    words, notes = launch_words(text)
    assert words == ["VLLM_USE_V1=1", "HF_HOME=/data/hf", "vllm", "serve", "org/model", "-tp",
                     "2", "--max-model-len", "8192"]
    assert notes == []


def test_a_commented_out_flag_ends_a_continued_command_as_in_bash():
    # NOTE: a `\` inside a comment does not continue the line (bash runs `--d 1` alone).
    text = ("vllm serve org/model \\\n"
            "    --a 1 \\\n"
            "    # --b 2 \\\n"
            "    --d 1\n")
    cmds, _ = commands(text)
    assert cmds == [["vllm", "serve", "org/model", "--a", "1"], ["--d", "1"]]
    assert launch_words(text)[0] == ["vllm", "serve", "org/model", "--a", "1"]


def test_only_exported_variables_reach_the_launch():
    text = "VLLM_USE_V1=0\nexport HF_HOME=/hf\nX=1 true\nexport VLLM_USE_V1\nvllm serve m\n"
    assert launch_words(text)[0] == ["VLLM_USE_V1=0", "HF_HOME=/hf", "vllm", "serve", "m"]
    assert launch_words("A=1\nvllm serve m --port $A")[0] == ["vllm", "serve", "m", "--port",
                                                               "1"]


def test_prompt_redirections_background_and_chains():
    assert launch_words("$ vllm serve m --port 8000 > serve.log 2>&1 &")[0] == [
        "vllm", "serve", "m", "--port", "8000"]
    assert launch_words("cd /srv && VLLM_LOGGING_LEVEL=DEBUG vllm serve m | tee log")[0] == [
        "VLLM_LOGGING_LEVEL=DEBUG", "vllm", "serve", "m"]
    assert launch_words("nohup vllm serve m &>> out.log; echo started")[0] == [
        "nohup", "vllm", "serve", "m"]


def test_several_launches_read_the_first_and_say_so():
    text = ("# leader\nvllm serve m --data-parallel-size 4 --port 8000\n\n"
            "# follower\nvllm serve m --headless --data-parallel-start-rank 2\n")
    words, notes = launch_words(text)
    assert words == ["vllm", "serve", "m", "--data-parallel-size", "4", "--port", "8000"]
    assert notes == ["the pasted snippet has 2 vLLM launch commands; the first is read"]


def test_parameter_expansion_from_the_snippet_and_defaults():
    text = ('MODEL=org/model\nexport PORT=9000\n'
            'python3 -m vllm.entrypoints.openai.api_server --model "$MODEL" --port ${PORT} \\\n'
            '  --max-model-len ${MAX_LEN:-4096} ${REVISION:+--revision "$REVISION"} \\\n'
            '  --served-model-name ${NAME}\n')
    words, _ = launch_words(text)
    # NOTE: only exported variables reach the launch's environment; all expand
    assert words == ["PORT=9000", "python3", "-m",
                     "vllm.entrypoints.openai.api_server", "--model", "org/model", "--port",
                     "9000", "--max-model-len", "4096", "--served-model-name", "${NAME}"]
    words, _ = launch_words('REVISION=abc\nvllm serve m ${REVISION:+--revision "$REVISION"}')
    assert words[-2:] == ["--revision", "abc"]


def test_quotes_json_placeholders_and_substitutions():
    text = ("vllm serve m --speculative-config '{\"method\": \"ngram\", \"x\": 1}' "
            "--chat-template \"a \\\"b\\\" c\" --port <http_port> --host $(hostname -i)")
    assert launch_words(text)[0] == [
        "vllm", "serve", "m", "--speculative-config", '{"method": "ngram", "x": 1}',
        "--chat-template", 'a "b" c', "--port", "<http_port>", "--host", "$(hostname -i)"]


def test_makefile_and_dockerfile_shapes():
    make = "serve-qwen:\n\tvllm serve Qwen/Qwen3-4B \\\n\t\t--max-model-len 16k\n"
    assert launch_words(make)[0] == ["vllm", "serve", "Qwen/Qwen3-4B", "--max-model-len", "16k"]
    docker = ("FROM vllm/vllm-openai:v0.8.5\n\n"
              "ENTRYPOINT python3 -m vllm.entrypoints.openai.api_server \\\n"
              "    --model ${MODEL_NAME:-org/model}\n")
    assert launch_words(docker)[0] == ["python3", "-m", "vllm.entrypoints.openai.api_server",
                                       "--model", "org/model"]


def test_flags_one_per_line_without_a_launch_stay_together():
    assert launch_words("--model m\n-tp 2\n")[0] == ["--model", "m", "-tp", "2"]


def test_an_unclosed_quote_is_a_usage_error():
    with pytest.raises(UsageError, match="No closing quotation"):
        launch_words("vllm serve m --chat-template 'oops")


def test_a_pasted_snippet_through_the_command_parser():
    text = ("export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1\n"
            "# serve with a longer context\n"
            "vllm serve Qwen/Qwen2.5-7B-Instruct \\\n"
            "  --max-model-len 65536 \\\n"
            "  # --enforce-eager\n"
            "vllm serve Qwen/Qwen2.5-7B-Instruct --port 8001\n")
    cmd = parse_vllm_command(text)
    assert cmd.model == "Qwen/Qwen2.5-7B-Instruct"
    assert cmd.settings.max_model_len == 65536 and not cmd.settings.enforce_eager
    assert cmd.env == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    assert cmd.notes[0] == "the pasted snippet has 2 vLLM launch commands; the first is read"


def test_nested_expansions_stop_and_a_huge_paste_is_refused():
    nested = "vllm serve " + "${A:-" * 1000 + "m" + "}" * 1000
    words, _ = launch_words(nested)           # NOTE: linear: 8 levels expanded, the rest kept
    assert words[:2] == ["vllm", "serve"] and words[2].startswith("${A:-")
    with pytest.raises(UsageError, match="a launch command is a few KiB"):
        launch_words("vllm serve m " + "x" * (300 << 10))
