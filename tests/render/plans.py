"""Hand-built Plans for renderer tests (no planner involved)."""

from vramguard.core.plan import Fix, KvCapacity, Ledger, Outcome, Plan
from vramguard.core.provenance import GIB, Estimate, Source


def _ledger(rank=0, tp_rank=0, pp_rank=0, kv_gib=54.58, layers=(0, 32)):
    ex = Estimate.exact
    return Ledger(
        rank=rank, tp_rank=tp_rank, pp_rank=pp_rank,
        total=ex(int(79.19 * GIB), Source.CATALOG),
        free_at_start=ex(int(78.7 * GIB), Source.ESTIMATED),
        requested=ex(int(71.27 * GIB), Source.DERIVED),
        weights=ex(int(14.99 * GIB), Source.CHECKPOINT),
        activation=Estimate.banded(1.2 * GIB, 0.25, Source.ESTIMATED),
        non_torch=Estimate.banded(0.5 * GIB, 0.5, Source.ESTIMATED),
        cuda_graph=ex(0, Source.VLLM_DEFAULT, "not budgeted before 0.18"),
        kv_cache=Estimate.banded(kv_gib * GIB, 0.02, Source.DERIVED),
        kv_bytes_per_token=131072, page_size_bytes=2 << 20, num_blocks=int(kv_gib * 512),
        layers=layers)


def ok_plan(ranks=1):
    ledgers = tuple(_ledger(rank=r, tp_rank=r, kv_gib=54.58 - r * 0.1) for r in range(ranks))
    return Plan(
        model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-80GB", vllm_version="0.11.0",
        engine="v1", outcome=Outcome(ok=True, risks=("CUDA graphs must fit in the headroom",)),
        ledgers=ledgers,
        kv=KvCapacity(bytes_per_token=131072, block_size=16, page_size_bytes=2 << 20,
                      num_blocks=27945, tokens=447120, max_concurrency=3.4112,
                      max_model_len=131072, blocks_per_request=8192),
        settings={"tensor_parallel_size": ranks, "gpu_memory_utilization": 0.9,
                  "max_model_len": 131072, "max_num_seqs": 1024, "enforce_eager": False},
        settings_sources={"gpu_memory_utilization": "vllm_default", "max_model_len": "config",
                          "tensor_parallel_size": "user"},
        log_lines=("Available KV cache memory: 54.58 GiB",
                   "GPU KV cache size: 447,120 tokens",
                   "Maximum concurrency for 131,072 tokens per request: 3.41x"),
        assumptions=("activation and non-torch memory estimated (not calibrated)",))


def failing_plan():
    msg = ("To serve at least one request with the model's max seq len (131072), (16.0 GiB KV "
           "cache is needed, which is larger than the available KV cache memory (6.57 GiB).")
    return Plan(
        model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-80GB", vllm_version="0.29.0",
        engine="v1", outcome=Outcome(ok=False, failure="kv_below_max_model_len", message=msg),
        ledgers=(_ledger(kv_gib=6.57),),
        kv=KvCapacity(bytes_per_token=131072, block_size=16, page_size_bytes=2 << 20,
                      num_blocks=3364, tokens=53824, max_concurrency=0.41,
                      max_model_len=131072, blocks_per_request=8192,
                      estimated_max_model_len=53776),
        settings={"gpu_memory_utilization": 0.3, "max_model_len": 131072},
        settings_sources={"gpu_memory_utilization": "user"},
        fixes=(Fix("lower max_model_len to what fits", {"--max-model-len": "53776"}),
               Fix("raise gpu_memory_utilization", {"gpu_memory_utilization": "0.5"})))
