"""Inputs a fuzzing sweep of diagnose / calibrate / history / check / stress / exporter / model
found to end in a traceback (tenth session): each now ends in one clear line (exit 2) or, for
a log's unreadable values, in a diagnosis that treats them as unknown (exit 0)."""

import sqlite3

import pytest

from vramguard.cli import main

FIT = ("ERROR 08-01 10:00:00 core.py:1] ValueError: To serve at least one request with the "
       "models's max seq len ({L}), ({need} GiB KV cache is needed, which is larger than the "
       "available KV cache memory (2.00 GiB).\n")
LOGS = {
    "model_int.log": "INFO 08-01 10:00:00 api_server.py:1] non-default args: {'model': 3}\n",
    "complex.log": "INFO 08-01 10:00:00 api_server.py:1] non-default args: "
                   "{'model': 'x', 'foo': 1j, 'bar': b'x'}\n",
    "tp_nan.log": "INFO 08-01 10:00:00 api_server.py:1] non-default args: {'model': 'm', "
                  "'tensor_parallel_size': 'nan', 'max_num_seqs': 'inf'}\n" + FIT.format(
                      L=4096, need="4.00"),
    "fit_huge.log": FIT.format(L="1" + "0" * 400, need="4.00"),
    "ver_huge.log": "INFO 08-01 10:00:00 api_server.py:1] vLLM API server version 0." + "9" * 5000
                    + "\n",
}


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VRAMGUARD_DATA_DIR", str(tmp_path / "data"))


@pytest.mark.parametrize("name", sorted(LOGS))
@pytest.mark.parametrize("json_out", [False, True])
def test_diagnose_odd_values_are_unknown_not_a_crash(tmp_path, capsys, name, json_out):
    path = tmp_path / name
    path.write_text(LOGS[name])
    rc = main(["diagnose", *(["--json"] if json_out else []), str(path)])
    _, err = capsys.readouterr()
    assert rc in (0, 1) and "Traceback" not in err


def test_history_of_a_foreign_database(tmp_path, capsys):
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE startups (id INTEGER PRIMARY KEY)")
    rc = main(["history", "--db", str(db)])
    _, err = capsys.readouterr()
    assert rc == 2 and "not a vramguard calibration store" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, needle", [
    (["check", "meta-llama/Meta-Llama-3-8B", "--headroom-gib", "1e300"], "--headroom-gib"),
    (["stress", "--url", "http://a b"], "not a URL"),
    (["exporter", "--no-gpu", "--url", "http://127.0.0.1:1", "--listen", "a..b:9400"],
     "is not a host name or IP address"),
    (["exporter", "--no-gpu", "--url", "http://127.0.0.1:1", "--listen", "127.0.0.1:9400:1"],
     "is not a host name or IP address"),
    (["plan"], "MODEL: no model given"),
])
def test_bad_options_exit_2(capsys, argv, needle):
    rc = main(argv)
    _, err = capsys.readouterr()
    assert rc == 2 and needle in err and "Traceback" not in err
    assert err.count(f"vramguard {argv[0]}:") == 1


def test_version_with_non_ascii_digits():
    from vramguard.core.rules import parse_version
    assert parse_version("0.1²") == (0, 0, 0)     # "1²" is not a number (int() refused it)
    assert parse_version("0.11." + "9" * 5000) == (0, 11, 0)


def test_undecodable_argument_bytes_become_replacement_characters():
    from vramguard.logs.store import utf8_text
    assert utf8_text("t\udcff") == "t\ufffd" and utf8_text(None) is None and utf8_text(3) == 3
    assert utf8_text("t\udcff").encode("utf-8") == b"t\xef\xbf\xbd"
