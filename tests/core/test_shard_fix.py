"""The plan's fix when the weights do not fit: the fewest GPUs like this one that hold them
(core/shard_fix.py), computed from the per-rank weights, not "twice the TP"."""

from core_specs import dense, llama31_8b
from vramguard.core import failures as F
from vramguard.core.gpu import GpuSpec
from vramguard.core.gpu_catalog import lookup_gpu
from vramguard.core.planner import PlanHooks, plan
from vramguard.core.provenance import GIB
from vramguard.core.settings import Settings

H100 = lookup_gpu("H100")


def _llama70b():
    return dense("meta-llama/Llama-3.1-70B-Instruct", layers=80, hidden=8192, heads=64,
                 kv_heads=8, inter=28672)


def test_a_70b_model_on_one_h100_needs_two():
    p = plan(_llama70b(), Settings(max_model_len=8192), H100)
    assert p.outcome.failure == F.WEIGHTS_OOM
    fix = p.fixes[0]
    assert fix.flags == {"--tensor-parallel-size": "2"}
    assert fix.summary.startswith("shard the weights: -tp 2 (2 GPUs, ~")
    two = plan(_llama70b(), Settings(max_model_len=8192, tensor_parallel_size=2), H100)
    assert two.outcome.failure != F.WEIGHTS_OOM           # the fix gets past the load


def test_beyond_one_node_pipeline_stages_follow():
    big = dense("huge", layers=160, hidden=16384, heads=128, kv_heads=8, inter=65536)
    p = plan(big, Settings(max_model_len=4096), H100)       # ~1.3 TB of bf16 weights
    assert p.fixes[0].flags == {"--tensor-parallel-size": "8", "--pipeline-parallel-size": "4"}
    assert "(32 GPUs, ~" in p.fixes[0].summary


def test_nothing_holds_it_says_so():
    tiny = GpuSpec(name="tiny", total_bytes=2 * GIB, compute_capability=(8, 0))
    p = plan(_llama70b(), Settings(max_model_len=2048), tiny, free_bytes=2 * GIB)
    assert p.outcome.failure == F.WEIGHTS_OOM     # 141 GB / 64 GPUs > 0.92 x 2 GiB
    assert p.fixes[0].flags == {}
    assert p.fixes[0].summary.startswith("the weights do not fit on 64 GPUs like this one")


def test_no_utilization_is_offered_when_nothing_is_free():
    tiny = GpuSpec(name="tiny", total_bytes=GIB // 4, compute_capability=(8, 0))
    p = plan(llama31_8b(), Settings(max_model_len=2048), tiny)     # the context alone
    assert p.outcome.failure == F.FREE_MEMORY_BELOW_REQUEST
    assert [f.flags for f in p.fixes] == [{}]
    assert p.fixes[0].summary == "stop the other processes on the GPU"


def test_pinned_weights_are_scaled_per_shape():
    p = plan(llama31_8b(), Settings(max_model_len=4096), H100,
             hooks=PlanHooks(weights_bytes=100 * GIB))
    summary = p.fixes[0].summary
    assert p.fixes[0].flags == {"--tensor-parallel-size": "2"}
    per_gpu = float(summary.split("~")[1].split(" GiB")[0])
    assert 49 < per_gpu < 52           # 100 GiB over two ranks, the replicated parts twice
