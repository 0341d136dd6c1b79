"""Robustness: no exception ever escapes the parser; streaming stays bounded and exact."""
import io
import random
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramguard.logs.diagnose import diagnose
from vramguard.logs.parser import parse
from vramguard.logs.reader import iter_lines, scan

from .conftest import CPU, load_cases

REAL_LINES = [ln for c in load_cases() for ln in c["raw_log_excerpt"].splitlines() if ln]
REAL_LINES += (CPU / "startup.log").read_text(errors="replace").splitlines()
FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _both(data: bytes, **kw):
    fast = parse(data, **kw)
    full = parse(data, full=True, **kw)
    diagnose(fast)
    diagnose(full)
    fast.to_dict()
    return fast, full


@FAST
@given(st.binary(max_size=4000))
def test_random_bytes(data):
    _both(data)


@st.composite
def mutated_lines(draw):
    lines = draw(st.lists(st.sampled_from(REAL_LINES), min_size=1, max_size=12))
    out = []
    for line in lines:
        b = bytearray(line.encode("utf-8", errors="replace"))
        for _ in range(draw(st.integers(0, 4))):
            if not b:
                break
            op = draw(st.sampled_from(("flip", "cut", "dup", "ins")))
            i = draw(st.integers(0, len(b) - 1))
            if op == "flip":
                b[i] = draw(st.integers(0, 255))
            elif op == "cut":
                del b[i:i + draw(st.integers(1, 20))]
            elif op == "dup":
                b[i:i] = b[i:i + draw(st.integers(1, 30))]
            else:
                b[i:i] = draw(st.sampled_from([b"\x1b[31m", b"\r", b"(", b"{'", b"-1e999",
                                               b"9" * 400, b"GiB", b"\xe2\x96\x88", b"nan"]))
        out.append(bytes(b))
    sep = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    return sep.join(out)


@FAST
@given(mutated_lines())
def test_mutated_real_lines(data):
    _both(data)


@FAST
@given(mutated_lines(), st.integers(1, 64))
def test_chunking_does_not_change_the_result(data, chunk):
    """Any chunk size and the slow every-line path agree with the default fast path."""
    ref = parse(data).to_dict()
    small = parse(data, chunk_bytes=chunk).to_dict()
    full = parse(data, full=True).to_dict()
    for d in (small, full):
        d["recognized_lines"] = ref["recognized_lines"] = 0
        d["lines"] = ref["lines"]
    assert small == ref

    def errs(d):
        return [{k: v for k, v in e.items() if k != "seq"} for e in d["errors"]]
    assert errs(full) == errs(ref) and full["phase"] == ref["phase"]


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 3), st.sampled_from([b"GiB ", b"x", b"\xff", b"Available KV cache memory: "]))
def test_huge_lines_are_truncated(n_mb, fill):
    line = fill * ((n_mb << 20) // len(fill))
    data = b"Model loading took 1.5 GiB\n" + line + b"\nAvailable KV cache memory: 2.0 GiB\n"
    ex = parse(data, max_line_bytes=4096)
    assert ex.weights_gib == 1.5 and ex.available_kv_gib is not None
    if fill == b"GiB ":             # a line the parser looks at: counted as truncated
        assert ex.truncated_lines >= 1


def test_huge_line_without_newline_at_all():
    data = b"x" * (3 << 20)
    ex = parse(data, max_line_bytes=1 << 16, chunk_bytes=1 << 16)
    assert ex.empty and ex.truncated_lines == 1
    assert list(iter_lines(io.BytesIO(b"a\r\nb\rc\nd"))) == ["a", "b", "c", "d"]


def _synthetic_log(n_lines: int, seed: int = 7) -> bytes:
    rnd = random.Random(seed)
    head = (CPU / "startup.log").read_bytes()
    body = []
    for i in range(n_lines):
        r = rnd.random()
        if r < 0.8:
            body.append(f'INFO:     127.0.0.1:{40000 + i % 999} - "POST /v1/completions HTTP/1.1"'
                        f' 200 OK')
        elif r < 0.95:
            body.append(f"(APIServer pid=1) INFO 11-29 08:44:18 [logger.py:1] Received request "
                        f"cmpl-{i:x}: params: SamplingParams(max_tokens={i % 512})")
        else:
            body.append(f"(APIServer pid=1) INFO [loggers.py:335] Engine 000: Avg prompt "
                        f"throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
                        f"Running: {i % 9} reqs, Waiting: 0 reqs, GPU KV cache usage: "
                        f"{i % 100}.0%, Prefix cache hit rate: 0.0%")
    tail = ("(EngineCore pid=2) ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to "
            "allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.00 GiB is "
            "free.\n")
    return head + ("\n".join(body) + "\n" + tail).encode()


def test_streaming_multi_mb_log_in_bounded_memory(tmp_path):
    path = tmp_path / "big.log"
    data = _synthetic_log(120_000)          # ~10 MB
    path.write_bytes(data)
    del data
    tracemalloc.start()
    ex = parse(path, chunk_bytes=1 << 20)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 12 << 20                  # a few chunks, never the file
    assert ex.lines > 120_000 and ex.stats.samples > 1000
    assert ex.errors[-1].kind == "torch_oom" and diagnose(ex).failure == "runtime_oom"


def test_restart_after_the_startup_window_is_seen(tmp_path):
    """A second startup far into a log (past the first window) is parsed with every anchor."""
    filler = b'INFO:     127.0.0.1:1 - "GET /metrics HTTP/1.1" 200 OK\n' * 40_000
    second = (b"(APIServer pid=9) INFO non-default args: {'model': 'm/n', 'max_model_len': 99}\n"
              b"(EngineCore pid=8) INFO Initializing a V1 LLM engine (v0.11.0) with config: "
              b"model='m/n'\n"
              b"(EngineCore pid=8) INFO Model loading took 3.0 GiB memory and 1 s\n"
              b"(EngineCore pid=8) INFO Available KV cache memory: 7.0 GiB\n"
              b"(EngineCore pid=8) INFO Auto-fit max_model_len: full model context length 99 "
              b"fits in available GPU memory\n")
    data = (CPU / "startup.log").read_bytes() + filler + second
    fed = []
    scan(data, lambda line: fed.append(line) or False, chunk_bytes=1 << 16)
    assert len(fed) < 400                   # the filler is skipped, not fed line by line
    ex = parse(data, chunk_bytes=1 << 16)
    assert ex.startups == 2 and ex.version == "0.11.0" and ex.model == "m/n"
    assert ex.auto_fit == (99, 99) and ex.available_kv_gib == 7.0


def test_a_long_startup_is_scanned_with_every_anchor():
    """Startup lines far past the first window (a verbose startup) are still all read."""
    noise = b"(Worker pid=1) DEBUG [loader.py:1] loaded tensor layers.N.mlp.weight\n" * 200_000
    data = (b"(EngineCore pid=2) INFO Initializing a V1 LLM engine (v0.11.0) with config: "
            b"model='m/n'\n" + noise +
            b"(EngineCore pid=2) INFO Model loading took 3.0 GiB memory and 1 s\n"
            b"(EngineCore pid=2) INFO Available KV cache memory: 7.0 GiB\n"
            b"(EngineCore pid=2) INFO # GPU blocks: 100\n"
            b"(EngineCore pid=2) INFO init engine (profile, create kv cache, warmup model) "
            b"took 9.0 seconds\n" + noise)
    ex = parse(data, chunk_bytes=1 << 20)
    assert ex.weights_gib == 3.0 and ex.num_gpu_blocks == 100 and ex.started


def test_a_number_too_large_for_a_float_is_not_a_measurement():
    """Found by the fuzz above: a 400-digit 'Available KV cache memory' became float('inf')
    and the v0 fit fix overflowed; non-finite figures now read as missing."""
    huge = "9" * 400
    data = ("total_gpu_memory     79.22GiB\nValueError: The model's max seq len (32768) is larger "
            "than the maximum number of tokens that can be stored in KV cache (4464).\n"
            "(EngineCore pid=241) INFO 04-22 00:24:08 [v1/worker/gpu_worker.py:436] Available KV "
            f"cache memory: {huge}.11 GiB\n").encode()
    fast, _ = _both(data)
    assert fast.available_kv_gib is None


def test_continuation_cap_holds_across_chunks():
    """A wrapped message whose continuations straddle a chunk boundary joins at most
    MAX_CONTINUATION_LINES lines, as in one chunk (found by the chunking sweep above)."""
    fit = b"ValueError: To serve at least one request with the models's max seq len (16384),\n"
    data = fit + b"total_gpu_memory     79.22GiB\n" * 6 + b"\rValueError: No available memory."
    ref = parse(data).to_dict()
    for chunk in (1, 7, 64):
        assert parse(data, chunk_bytes=chunk).to_dict()["errors"] == ref["errors"]
