"""Plan: what vLLM will decide at startup, per rank, and why. `Plan.to_dict()` is `--json`."""

from __future__ import annotations

from dataclasses import dataclass, field

from .provenance import Estimate

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Ledger:
    """The memory budget of one GPU rank (vLLM worker), term by term.

    kv_cache is what vLLM computes as the remainder (negative when short).
    """

    rank: int
    tp_rank: int
    pp_rank: int
    total: Estimate
    free_at_start: Estimate
    requested: Estimate
    weights: Estimate
    activation: Estimate
    non_torch: Estimate
    cuda_graph: Estimate
    kv_cache: Estimate
    kv_bytes_per_token: int = 0
    page_size_bytes: int = 0          # bytes per KV block on this rank (P)
    num_blocks: int | None = None     # K // P on this rank
    layers: tuple[int, int] = (0, 0)  # [first, last) decoder layers on this PP stage

    def to_dict(self) -> dict:
        return {
            "rank": self.rank, "tp_rank": self.tp_rank, "pp_rank": self.pp_rank,
            "layers": list(self.layers),
            "total_bytes": self.total.value_bytes,
            "free_at_start_bytes": self.free_at_start.value_bytes,
            "requested_bytes": self.requested.value_bytes,
            "weights_bytes": self.weights.value_bytes,
            "activation_bytes": self.activation.value_bytes,
            "non_torch_bytes": self.non_torch.value_bytes,
            "cuda_graph_bytes": self.cuda_graph.value_bytes,
            "kv_cache_bytes": self.kv_cache.value_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "page_size_bytes": self.page_size_bytes,
            "num_blocks": self.num_blocks,
            "terms": {name: getattr(self, name).to_dict() for name in (
                "total", "free_at_start", "requested", "weights", "activation",
                "non_torch", "cuda_graph", "kv_cache")},
        }


@dataclass(frozen=True)
class KvCapacity:
    """The KV pool vLLM will log: blocks, tokens and the maximum concurrency."""

    bytes_per_token: int
    block_size: int
    page_size_bytes: int
    num_blocks: int
    tokens: int
    max_concurrency: float
    max_model_len: int
    blocks_per_request: int
    estimated_max_model_len: int | None = None   # vLLM's estimate when one request does not fit

    def to_dict(self) -> dict:
        return {
            "bytes_per_token": self.bytes_per_token, "block_size": self.block_size,
            "page_size_bytes": self.page_size_bytes, "num_blocks": self.num_blocks,
            "tokens": self.tokens, "max_concurrency": round(self.max_concurrency, 4),
            "max_model_len": self.max_model_len, "blocks_per_request": self.blocks_per_request,
            "estimated_max_model_len": self.estimated_max_model_len,
        }


@dataclass(frozen=True)
class Outcome:
    """Will vLLM start? `failure` is one of core.failures.STARTUP_FAILURES or None."""

    ok: bool
    failure: str | None = None
    message: str | None = None        # vLLM's own message for that version
    risks: tuple[str, ...] = ()       # non-fatal risks (e.g. graphs in the headroom)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "failure": self.failure, "message": self.message,
                "risks": list(self.risks)}


@dataclass(frozen=True)
class Fix:
    """One suggested change: flags to set and why."""

    summary: str
    flags: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"summary": self.summary, "flags": dict(self.flags)}


@dataclass(frozen=True)
class Plan:
    """The predicted startup of one vLLM instance."""

    model: str
    gpu: str
    vllm_version: str
    engine: str
    outcome: Outcome
    ledgers: tuple[Ledger, ...]
    kv: KvCapacity | None
    settings: dict[str, object]                   # every effective value, defaults included
    settings_sources: dict[str, str] = field(default_factory=dict)   # flag -> Source value
    log_lines: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    fixes: tuple[Fix, ...] = ()
    calibrated: bool = False

    def __getattr__(self, name: str):
        # NOTE: only reached for a missing attribute. A screened plan (`planner.screen`)
        # builds its per-rank ledgers on first use: most screened candidates never read
        # them. `_lazy_ledgers` (the builder) is dropped once they are built.
        d = object.__getattribute__(self, "__dict__")
        build = d.get("_lazy_ledgers") if name == "ledgers" else None
        if build is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        d["ledgers"] = value = build()
        del d["_lazy_ledgers"]
        return value

    @property
    def tightest(self) -> Ledger:
        """The rank with the smallest KV remainder decides (vLLM takes the minimum)."""
        return min(self.ledgers, key=lambda l: l.kv_cache.value_bytes)

    def to_dict(self) -> dict:
        """The documented, stable `--json` schema (docs/json-schema.md)."""
        t = self.tightest
        per_gpu = {k: v for k, v in t.to_dict().items() if k.endswith("_bytes") or k == "rank"}
        return {
            "schema_version": SCHEMA_VERSION,
            "model": self.model, "gpu": self.gpu,
            "vllm_version": self.vllm_version, "engine": self.engine,
            "startup": self.outcome.to_dict(),
            "per_gpu": per_gpu,
            "ranks": [l.to_dict() for l in self.ledgers],
            "kv_cache": self.kv.to_dict() if self.kv else None,
            "settings": dict(self.settings),
            "settings_sources": dict(self.settings_sources),
            "log_lines": list(self.log_lines),
            "assumptions": list(self.assumptions),
            "fixes": [f.to_dict() for f in self.fixes],
            "calibrated": self.calibrated,
        }
