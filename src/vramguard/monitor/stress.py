"""`vramguard stress`: a bounded load ramp against a vLLM OpenAI endpoint, level by level.

    result = run_stress(StressConfig(url="http://127.0.0.1:8000", levels=(1, 2, 4, 8)))
    result.knee          # the highest concurrency (of a clean prefix of levels) without preemption

At each concurrency level `c`, `c` worker threads send `/v1/completions` requests (the model
name from `/v1/models`) until `requests_per_level` were sent or `duration_per_level_s` passed;
a sampler thread scrapes `/metrics` meanwhile (peak KV usage, running/waiting) and the
preemption counter is read before and after the level.

Safety: standard library only (threads + urllib); the only target is the URL given (loopback
or explicit); every loop is bounded in count and in time; one request never outlives
`request_timeout_s`. Prompts are token-id lists (exact prompt length, unique per request so
prefix caching cannot hide the load) with `ignore_eos` so every reply is `max_tokens` long.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from ..errors import MonitorError, UsageError

MAX_LEVELS = 32
MAX_CONCURRENCY = 1024
MAX_REQUESTS_PER_LEVEL = 100_000
SAMPLE_INTERVAL_S = 0.1
# NOTE: vLLM updates its gauges and counters as the API server processes engine outputs;
# on busy cores that lags the responses by seconds. After a level, /metrics is read until it
# counts the level's generated tokens and shows an idle engine and an unchanged preemption
# counter twice (at most this long).
SETTLE_MAX_S = 15.0
SETTLE_INTERVAL_S = 0.25
# NOTE: the API server answers /metrics between requests; on 2 busy cores under 8 clients a
# scrape took up to 3.3 s (measured). A slow reading is still a reading.
SAMPLE_TIMEOUT_S = 10.0
TOKEN_ID_RANGE = (16, 256)      # NOTE: ids every tokenizer has (byte-level vocabularies: bytes)


@dataclass(frozen=True)
class StressConfig:
    """What to send. `requests_per_level=None` means 2 x concurrency (at least 4)."""

    url: str
    levels: tuple[int, ...] = (1, 2, 4, 8)
    prompt_tokens: int = 128
    max_tokens: int = 64
    requests_per_level: int | None = None
    duration_per_level_s: float = 60.0
    request_timeout_s: float = 120.0
    model_name: str | None = None          # served model name; None: the first of /v1/models
    seed: int = 0

    def requests_for(self, concurrency: int) -> int:
        if self.requests_per_level is not None:
            return self.requests_per_level
        return max(4, 2 * concurrency)


@dataclass(frozen=True)
class LevelResult:
    """One concurrency level: latency, throughput and what /metrics showed meanwhile."""

    concurrency: int
    requests_sent: int
    requests_ok: int
    requests_failed: int
    duration_s: float
    latency_p50_s: float | None
    latency_p95_s: float | None
    latency_max_s: float | None
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    kv_usage_peak: float | None           # fraction 0-1, the max seen while the level ran
    running_peak: int | None
    waiting_peak: int | None
    preemptions: int | None               # counter delta over the level
    errors: tuple[str, ...] = ()          # the first few distinct error messages
    stopped_by: str = "count"             # "count" or "time"
    scrapes_ok: int = 0                   # /metrics readings while the level ran
    scrapes_failed: int = 0
    scrape_error: str | None = None       # the first failed reading's error
    scrapes_stale: int = 0                # readings showing no request while some ran

    @property
    def preempted(self) -> bool:
        return bool(self.preemptions)

    @property
    def clean(self) -> bool:
        """No preemption and no failed request."""
        return not self.preempted and self.requests_failed == 0

    def to_dict(self) -> dict:
        r = lambda v, n=4: None if v is None else round(v, n)  # noqa: E731
        return {
            "concurrency": self.concurrency, "requests_sent": self.requests_sent,
            "requests_ok": self.requests_ok, "requests_failed": self.requests_failed,
            "duration_s": r(self.duration_s, 3), "stopped_by": self.stopped_by,
            "latency_p50_s": r(self.latency_p50_s), "latency_p95_s": r(self.latency_p95_s),
            "latency_max_s": r(self.latency_max_s), "output_tokens": self.output_tokens,
            "output_tokens_per_s": r(self.output_tokens_per_s, 2),
            "requests_per_s": r(self.requests_per_s, 3),
            "kv_usage_peak": self.kv_usage_peak, "running_peak": self.running_peak,
            "waiting_peak": self.waiting_peak, "preemptions": self.preemptions,
            "errors": list(self.errors), "scrapes_ok": self.scrapes_ok,
            "scrapes_failed": self.scrapes_failed, "scrape_error": self.scrape_error,
            "scrapes_stale": self.scrapes_stale,
        }


@dataclass(frozen=True)
class ServerInfo:
    """What the endpoint says about itself before the ramp."""

    model_name: str
    max_model_len: int | None
    num_gpu_blocks: int | None
    block_size: int | None
    kv_cache_max_concurrency: float | None   # vLLM's own, for max_model_len-long requests

    def workload_concurrency(self, tokens_per_request: int) -> int | None:
        """Requests of `tokens_per_request` tokens that fit in the pool at once.

        NOTE: vLLM v1 keeps one block as the null block, so usable = num_gpu_blocks - 1.
        """
        if not self.num_gpu_blocks or not self.block_size:
            return None
        per_request = math.ceil(tokens_per_request / self.block_size)
        return max(0, self.num_gpu_blocks - 1) // per_request

    def to_dict(self) -> dict:
        return {"model_name": self.model_name, "max_model_len": self.max_model_len,
                "num_gpu_blocks": self.num_gpu_blocks, "block_size": self.block_size,
                "kv_cache_max_concurrency": self.kv_cache_max_concurrency}


@dataclass(frozen=True)
class PlannedKv:
    """The planner's KV pool for this server's model/GPU/flags (to compare with the ramp)."""

    max_concurrency: float | None
    num_blocks: int | None
    block_size: int | None
    source: str

    def workload_concurrency(self, tokens_per_request: int) -> int | None:
        info = ServerInfo("", None, self.num_blocks, self.block_size, None)
        return info.workload_concurrency(tokens_per_request)


@dataclass(frozen=True)
class StressResult:
    """The whole ramp. `knee` is the highest level of the clean prefix (None: level 1 failed)."""

    url: str
    config: StressConfig
    server: ServerInfo
    levels: tuple[LevelResult, ...]
    planned: PlannedKv | None = None                   # from the planner, when asked
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def knee(self) -> int | None:
        """The highest concurrency without preemption (or failures), below the first bad one."""
        best = None
        for level in self.levels:
            if level.preempted or level.requests_failed:
                break
            best = level.concurrency
        return best

    @property
    def first_preempting(self) -> int | None:
        return next((l.concurrency for l in self.levels if l.preempted), None)

    @property
    def workload_fit(self) -> int | None:
        return self.server.workload_concurrency(self.config.prompt_tokens + self.config.max_tokens)

    @property
    def planned_workload_fit(self) -> int | None:
        if self.planned is None:
            return None
        return self.planned.workload_concurrency(self.config.prompt_tokens + self.config.max_tokens)

    def to_dict(self) -> dict:
        c = self.config
        return {
            "url": self.url,
            "workload": {"prompt_tokens": c.prompt_tokens, "max_tokens": c.max_tokens,
                         "levels": list(c.levels), "requests_per_level": c.requests_per_level,
                         "duration_per_level_s": c.duration_per_level_s},
            "server": self.server.to_dict(),
            "levels": [l.to_dict() for l in self.levels],
            "knee_concurrency": self.knee,
            "first_preempting_concurrency": self.first_preempting,
            "workload_fit_concurrency": self.workload_fit,
            "server_max_concurrency": self.server.kv_cache_max_concurrency,
            "planned_max_concurrency": self.planned.max_concurrency if self.planned else None,
            "planned_num_blocks": self.planned.num_blocks if self.planned else None,
            "planned_workload_fit_concurrency": self.planned_workload_fit,
            "planned_source": self.planned.source if self.planned else None,
            "notes": list(self.notes),
        }


# --- validation -------------------------------------------------------------------------

def parse_levels(text: str) -> tuple[int, ...]:
    """`"1,2,4,8"` -> (1, 2, 4, 8): positive, strictly increasing, bounded."""
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"not a list of integers: {text!r}", where="--concurrency",
                         fix="Give levels like 1,2,4,8.") from None
    if not levels or any(l < 1 or l > MAX_CONCURRENCY for l in levels):
        raise UsageError(f"levels must be 1..{MAX_CONCURRENCY}", where="--concurrency",
                         fix="Give levels like 1,2,4,8.")
    if len(levels) > MAX_LEVELS or list(levels) != sorted(set(levels)):
        raise UsageError(f"levels must be increasing, at most {MAX_LEVELS}",
                         where="--concurrency", fix="Give levels like 1,2,4,8.")
    return levels


def base_url(url: str) -> str:
    """The server root of `url` (http/https only; a trailing /v1 or /metrics is dropped)."""
    if not url.strip():
        raise UsageError("empty URL", where="--url",
                         fix="Give the vLLM server's URL, e.g. http://127.0.0.1:8000.")
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port              # NOTE: raises ValueError for a port out of range or not a number
    except ValueError as exc:   # e.g. "Invalid IPv6 URL"
        raise UsageError(f"not a valid URL: {url!r} ({exc})", where="--url",
                         fix="Give the vLLM server's URL, e.g. http://127.0.0.1:8000.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"not an http(s) URL: {url!r}", where="--url",
                         fix="Give the vLLM server's URL, e.g. http://127.0.0.1:8000.")
    path = parts.path.rstrip("/")
    for suffix in ("/metrics", "/v1"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def validate(config: StressConfig) -> None:
    """Raise UsageError for a workload that is not bounded or not sensible."""
    if config.prompt_tokens < 1 or config.max_tokens < 1:
        raise UsageError("--prompt-tokens and --max-tokens must be >= 1")
    if config.requests_per_level is not None and not (
            1 <= config.requests_per_level <= MAX_REQUESTS_PER_LEVEL):
        raise UsageError(f"must be 1..{MAX_REQUESTS_PER_LEVEL}", where="--requests-per-level")
    if not (0 < config.duration_per_level_s <= 3600):
        raise UsageError("must be in (0, 3600] seconds", where="--duration-per-level")
    if not (0 < config.request_timeout_s <= 3600):
        raise UsageError("must be in (0, 3600] seconds", where="--timeout")


# --- HTTP -------------------------------------------------------------------------------

def _get_json(url: str, timeout_s: float) -> dict:
    import http.client
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            data = json.loads(resp.read(4 << 20))
    except urllib.error.HTTPError as exc:
        raise MonitorError(f"HTTP {exc.code} {exc.reason}", where=url,
                           fix="Is this a vLLM OpenAI-compatible server?") from None
    except http.client.InvalidURL as exc:
        raise UsageError(f"not a URL ({exc})", where="--url",
                         fix="Give the server's address, e.g. http://127.0.0.1:8000") from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        raise MonitorError(f"cannot reach it ({getattr(exc, 'reason', exc)})", where=url,
                           fix="Is vLLM running and listening there?") from None
    if not isinstance(data, dict):
        raise MonitorError(f"the answer is JSON {type(data).__name__}, not an object", where=url,
                           fix="Is this a vLLM OpenAI-compatible server?")
    return data


def server_info(root: str, model_name: str | None = None, timeout_s: float = 10.0) -> ServerInfo:
    """Read /v1/models and /metrics' cache_config_info. Raises MonitorError when unreachable."""
    from .metrics import scrape

    raw = _get_json(root + "/v1/models", timeout_s).get("data")
    models = [m for m in raw if isinstance(m, dict)] if isinstance(raw, list) else []
    if not models:
        raise MonitorError("no model served", where=root + "/v1/models")
    entry = next((m for m in models if m.get("id") == model_name), None)
    if model_name and entry is None:
        raise UsageError(f"model {model_name!r} not served (have: "
                         f"{', '.join(str(m.get('id')) for m in models)})", where="--served-model")
    entry = entry or models[0]
    blocks = size = conc = None
    scraped = scrape(root + "/metrics", timeout_s)
    if scraped.ok and scraped.engines:
        engine = scraped.engines[0]
        blocks = min((e.num_gpu_blocks for e in scraped.engines if e.num_gpu_blocks), default=None)
        size, conc = engine.block_size, engine.kv_cache_max_concurrency
    return ServerInfo(model_name=str(entry.get("id")), max_model_len=entry.get("max_model_len"),
                      num_gpu_blocks=blocks, block_size=size, kv_cache_max_concurrency=conc)


def _prompt(rng: random.Random, index: int, n_tokens: int) -> list[int]:
    """Token ids, unique per request in the first two ids (defeats prefix caching)."""
    lo, hi = TOKEN_ID_RANGE
    span = hi - lo
    head = [lo + (index // span) % span, lo + index % span]
    return (head + [rng.randrange(lo, hi) for _ in range(n_tokens)])[:n_tokens]


def _complete(root: str, model: str, prompt: list[int], max_tokens: int,
              timeout_s: float) -> int:
    """One completion; returns the generated token count. Raises on any failure."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0.0, "ignore_eos": True, "stream": False}).encode()
    req = urllib.request.Request(root + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        answer = json.loads(resp.read(16 << 20))
    usage = answer.get("usage") or {}
    return int(usage.get("completion_tokens") or 0)


# --- one level --------------------------------------------------------------------------

class _Level:
    """Shared state of one level's workers (guarded by a lock)."""

    def __init__(self, total: int, deadline: float):
        self.lock = threading.Lock()
        self.total, self.deadline = total, deadline
        self.sent = 0
        self.latencies: list[float] = []
        self.tokens = 0
        self.failed = 0
        self.errors: list[str] = []
        self.timed_out = False

    def claim(self) -> int | None:
        """The next request index, or None when the count or the time is used up."""
        with self.lock:
            if self.sent >= self.total:
                return None
            if time.monotonic() >= self.deadline:
                self.timed_out = True
                return None
            self.sent += 1
            return self.sent - 1

    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        with self.lock:
            return self.sent - len(self.latencies) - self.failed

    def done(self, latency: float, tokens: int | None, error: str | None) -> None:
        with self.lock:
            if error is None:
                self.latencies.append(latency)
                self.tokens += tokens or 0
            else:
                self.failed += 1
                if error not in self.errors and len(self.errors) < 5:
                    self.errors.append(error)


def _worker(state: _Level, root: str, model: str, config: StressConfig, seed: int) -> None:
    rng = random.Random(seed)
    while (index := state.claim()) is not None:
        prompt = _prompt(rng, seed * 100_003 + index, config.prompt_tokens)
        t0 = time.monotonic()
        try:
            tokens = _complete(root, model, prompt, config.max_tokens, config.request_timeout_s)
            state.done(time.monotonic() - t0, tokens, None)
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace").strip()
            state.done(time.monotonic() - t0, None, f"HTTP {exc.code}: {detail[:200]}")
        except Exception as exc:  # NOTE: a worker must never die silently mid-level
            state.done(time.monotonic() - t0, None, f"{type(exc).__name__}: {exc}"[:200])


class _Peaks:
    """The maxima of the /metrics readings of one level, and how many readings taken while
    it ran succeeded and failed."""

    def __init__(self):
        self.kv = self.running = self.waiting = None
        self.ok = self.failed = self.busy = self.stale = 0
        self.error: str | None = None

    def add(self, scraped, *, after: bool = False, in_flight: int = 0) -> None:
        """One reading; `after` the level's requests returned, it counts only while the
        engine still shows work (vLLM's gauges lag the responses). `in_flight`: requests
        the clients were waiting on when the reading began (an idle reading then is stale)."""
        if not scraped.ok:
            if not after:
                self.failed += 1
                self.error = self.error or scraped.error
            return
        d = scraped.to_dict()
        busy = bool(d.get("num_requests_running") or d.get("num_requests_waiting"))
        if after and not busy:
            return
        self.ok += not after
        self.busy += busy
        self.stale += bool(in_flight) and not busy
        self.kv = _max(self.kv, d.get("kv_cache_usage"))
        self.running = _max(self.running, d.get("num_requests_running"))
        self.waiting = _max(self.waiting, d.get("num_requests_waiting"))

    def known(self) -> bool:
        """False when no reading saw the engine busy though readings failed or showed it idle
        with requests in flight: an idle reading is no peak of the level."""
        return bool(self.busy) or not (self.failed or self.stale)


def _max(a, b):
    if b is None:
        return a
    return b if a is None else max(a, b)


def _sample_loop(root: str, peaks: _Peaks, stop: threading.Event, hard_deadline: float,
                 state: "_Level") -> None:
    from .metrics import scrape

    while not stop.is_set() and time.monotonic() < hard_deadline:
        in_flight = state.in_flight()
        peaks.add(scrape(root + "/metrics", timeout_s=SAMPLE_TIMEOUT_S), in_flight=in_flight)
        stop.wait(SAMPLE_INTERVAL_S)


def _counters(root: str, attempts: int = 3) -> tuple[int | None, int | None]:
    """(preemption counter, generation-token counter); None where not exported, both None
    when /metrics failed `attempts` times."""
    from .metrics import scrape

    for attempt in range(attempts):
        scraped = scrape(root + "/metrics", timeout_s=5.0)
        if scraped.ok:
            d = scraped.to_dict()
            return d.get("num_preemptions_total"), d.get("generation_tokens_total")
        time.sleep(0.5 * (attempt + 1))
    return None, None


def _settle(root: str, peaks: _Peaks, tokens_target: int | None) -> int | None:
    """The preemption counter once vLLM's metrics have caught up with the level: the
    generation-token counter holds the level's tokens (when exported), the engine shows idle
    and the preemption counter is unchanged between two reads. The reads feed the level's
    peaks (gauges that arrive late)."""
    from .metrics import scrape

    deadline = time.monotonic() + SETTLE_MAX_S
    last = None
    while time.monotonic() < deadline:
        scraped = scrape(root + "/metrics", timeout_s=5.0)
        if scraped.ok:
            peaks.add(scraped, after=True)
            d = scraped.to_dict()
            now = d.get("num_preemptions_total")
            gen = d.get("generation_tokens_total")
            caught_up = tokens_target is None or gen is None or gen >= tokens_target
            idle = not d.get("num_requests_running") and not d.get("num_requests_waiting")
            if caught_up and idle and last is not None and now == last:
                return now
            last = now if caught_up else None
        time.sleep(SETTLE_INTERVAL_S)
    return _counters(root)[0]


def run_level(root: str, model: str, config: StressConfig, concurrency: int,
              level_index: int = 0) -> LevelResult:
    """Run one level to completion (bounded by count and time) and summarize it."""
    total = config.requests_for(concurrency)
    before, generated_before = _counters(root)
    start = time.monotonic()
    state = _Level(total, start + config.duration_per_level_s)
    peaks, stop = _Peaks(), threading.Event()
    hard_deadline = state.deadline + config.request_timeout_s + 5
    sampler = threading.Thread(target=_sample_loop, args=(root, peaks, stop, hard_deadline, state),
                               name="stress-sampler", daemon=True)
    workers = [threading.Thread(target=_worker, name=f"stress-{concurrency}-{i}", daemon=True,
                                args=(state, root, model, config,
                                      config.seed * 1_000 + level_index * 64 + i + 1))
               for i in range(concurrency)]
    sampler.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=max(0.0, hard_deadline - time.monotonic()))
    duration = time.monotonic() - start
    stop.set()
    sampler.join(timeout=SAMPLE_TIMEOUT_S + 1)
    with state.lock:
        level_tokens = state.tokens
    after = _settle(root, peaks, None if generated_before is None
                    else generated_before + level_tokens)
    return _summarize(concurrency, state, peaks, duration,
                      None if before is None or after is None else max(0, after - before))


def _summarize(concurrency: int, state: _Level, peaks: _Peaks, duration: float,
               preemptions: int | None) -> LevelResult:
    with state.lock:
        lat = sorted(state.latencies)
        ok, failed, tokens, sent = len(lat), state.failed, state.tokens, state.sent
        errors, timed_out = tuple(state.errors), state.timed_out
    known = peaks.known()
    unfinished = sent - ok - failed        # still in flight at the hard deadline
    if unfinished > 0:
        failed += unfinished
        errors += (f"{unfinished} request(s) still running at the level's time limit",)
    wall = max(duration, 1e-9)
    return LevelResult(
        concurrency=concurrency, requests_sent=sent, requests_ok=ok, requests_failed=failed,
        duration_s=duration, latency_p50_s=_quantile(lat, 0.5), latency_p95_s=_quantile(lat, 0.95),
        latency_max_s=lat[-1] if lat else None, output_tokens=tokens,
        output_tokens_per_s=tokens / wall, requests_per_s=ok / wall,
        kv_usage_peak=peaks.kv if known else None,
        running_peak=peaks.running if known else None,
        waiting_peak=peaks.waiting if known else None,
        preemptions=preemptions, errors=errors, stopped_by="time" if timed_out else "count",
        scrapes_ok=peaks.ok, scrapes_failed=peaks.failed, scrape_error=peaks.error,
        scrapes_stale=peaks.stale)


def _quantile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank quantile of an already sorted list."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


# --- the ramp ---------------------------------------------------------------------------

def run_stress(config: StressConfig, *, planned: PlannedKv | None = None,
               on_level=None) -> StressResult:
    """Ramp through `config.levels`; `on_level(LevelResult)` is called after each one."""
    validate(config)
    root = base_url(config.url)
    info = server_info(root, config.model_name)
    need = config.prompt_tokens + config.max_tokens
    if info.max_model_len and need > info.max_model_len:
        raise UsageError(f"prompt + max tokens = {need} exceeds the server's max_model_len "
                         f"({info.max_model_len})", where="--prompt-tokens/--max-tokens",
                         fix="Send shorter requests.")
    notes = []
    if info.num_gpu_blocks is None:
        notes.append("no vllm:cache_config_info on /metrics: KV pool size unknown")
    levels = []
    for i, concurrency in enumerate(config.levels):
        level = run_level(root, info.model_name, config, concurrency, i)
        levels.append(level)
        if on_level is not None:
            on_level(level)
        if level.requests_ok == 0 and level.requests_failed:
            notes.append(f"stopped after concurrency {concurrency}: every request failed")
            break
    return StressResult(url=root, config=config, server=info, levels=tuple(levels),
                        planned=planned, notes=tuple(notes))
