"""`vramguard stress` argument handling that needs no server."""

from vramguard.cli import main


def test_vllm_flags_with_an_unbalanced_quote_is_exit_2(capsys):
    rc = main(["stress", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--offline",
               "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB",
               "--vllm-flags", "--max-model-len 'x"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--vllm-flags: cannot split the pasted command: No closing quotation" in err
