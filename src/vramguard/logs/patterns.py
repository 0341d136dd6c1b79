"""The regular expressions for every vLLM log line and message vramguard reads (0.4 → 0.33).

Formats are from docs `vllm-memory-semantics.md` §1b, §10, §11, §13. They are searched (not
anchored) so that process tags, timestamps, backticks and `ValueError:` prefixes don't
matter, and whitespace is matched loosely because people paste wrapped excerpts.
Each regex is only tried after a cheap substring test (see parser.py).
"""

from __future__ import annotations

import re

NUM = r"(-?\d+(?:\.\d+)?)"
INT = r"(\d[\d,]*)"
_S = r"\s+"

# ---- identity ----------------------------------------------------------------------------
API_VERSION = re.compile(r"vLLM API server version\s+v?(\d+\.\d+[\w.+\-]*)")
ENGINE_INIT = re.compile(r"Initializing (?:an?|a V([01])) LLM engine(?: \(v(\d+\.\d+[\w.+\-]*)\))?")
BANNER_VERSION = re.compile(r"[\u2580-\u259f]\s+version\s+v?(\d+\.\d+[\w.+\-]*)")
BANNER_MODEL = re.compile(r"[\u2580-\u259f]\s+model\s+(\S+)")
CONFIG_PAIR = re.compile(r"\b(\w+)=('[^']*'|\"[^\"]*\"|[^,\s)]+)")
ARGS = re.compile(r"non-default args:\s*(\{.*)")
ARG_PAIR = re.compile(r"'(\w+)':\s*('[^']*'|\"[^\"]*\"|-?[\d.eE+\-]+|True|False|None|\[[^\]]*\])")
COMMAND = re.compile(r"((?:vllm\s+serve\s+[\w.~/-]*[/.][\w.~/-]*|python3?\s+-m\s+vllm\.entrypoints\."
                     r"[\w.]+)\s[^`|\u3000-\uffff]*)")
LOG_RECORD = re.compile(r"^\s*(?:INFO|WARNING|DEBUG)\b")
INFO_RECORD = re.compile(r"^\s*(?:INFO|DEBUG)\b")
SHUTDOWN = re.compile(r"shutdown triggered|\[shutdown\]|Shutting down|received signal=SIG|"
                      r"SIGTERM|KeyboardInterrupt")
START_LOAD = re.compile(r"Starting to load model\s+(\S+?)(?:\.\.\.)?\s*$")
ARCH = re.compile(r"Resolved architecture:\s*(\w+)")
MAX_MODEL_LEN = re.compile(r"Using max model len\s+(\d+)")
GPU_NAME = re.compile(r"\b((?:NVIDIA|AMD Instinct) (?:GeForce )?(?:(?:RTX|GTX) (?:PRO )?[A-Z]?\d{3,4}\w*"
                      r"|(?:Tesla |Quadro )?[A-Z]{1,3}\d{1,4}\w*)(?:[ -](?:PCIe|SXM\d?|NVL|\d+GB|"
                      r"HBM\w*|Ti|SUPER|Ada|Max-Q|Workstation|Edition|Blackwell|Server|Generation"
                      r"))*)")
BLOCK_SIZE = re.compile(r"Setting (?:attention|kv cache) block size to\s+(\d+)")

# ---- weights and profiling ---------------------------------------------------------------
WEIGHTS = re.compile(r"(?:Loading model weights took|Model loading took)\s+" + NUM + r"\s*(GiB|GB)")
V0_TOTAL = re.compile(r"total_gpu_memory\s*(?:\(|=|\s)\s*" + NUM + r"\s*GiB")
V0_UTIL = re.compile(r"gpu_memory_utilization\s*(?:\(|=|\s)\s*(\d+(?:\.\d+)?)\b")
V0_USABLE = re.compile(r"instance can use(?:.*?=)?\s*" + NUM + r"\s*GiB")
V0_WEIGHTS = re.compile(r"model weights take\s*" + NUM + r"\s*GiB")
V0_NON_TORCH = re.compile(r"non_torch_memory(?:\s+takes)?\s*[=\s]\s*" + NUM + r"\s*GiB")
V0_ACTIVATION = re.compile(r"activation peak memory(?:\s+takes)?\s*" + NUM + r"\s*GiB")
V0_KV = re.compile(r"(?:reserved for KV Cache is|available_kv_cache_memory|kv_cache_size=)\s*"
                   + NUM + r"\s*GiB")
V064_INITIAL = re.compile(r"initial_memory_usage=" + NUM + "GiB")
V064_PEAK = re.compile(r"peak_torch_memory=" + NUM + "GiB")
V1_NON_KV = re.compile(r"Total non KV cache memory:\s*" + NUM + r"\s*GiB")
V1_PEAK = re.compile(r"torch peak memory increase:\s*" + NUM + r"\s*GiB")
V1_NON_TORCH = re.compile(r"non-torch forward increase memory:\s*" + NUM + r"\s*GiB")
V1_CONSUMED = re.compile(r"total consumed \(from mem_get_info\):\s*" + NUM + r"\s*GiB")
V1_WEIGHTS = re.compile(r"weights memory:\s*" + NUM + r"\s*GiB")

# ---- KV pool -----------------------------------------------------------------------------
AVAILABLE_KV = re.compile(r"Available KV cache memory:?\s*" + NUM + r"\s*GiB")
DEVICE_BLOCKS = re.compile(r"\b(GPU|CUDA|cuda|rocm|ROCm|xpu|XPU|hpu|HPU|tpu|TPU|npu|NPU|neuron)"
                           r" blocks:\s*" + INT)
CPU_BLOCKS = re.compile(r"\bCPU blocks:\s*" + INT)
KV_TOKENS = re.compile(r"(?:\b(\w+) )?KV cache size:\s*" + INT + r"\s*tokens")
CONCURRENCY = re.compile(r"Maximum concurrency for\s+" + INT + r"\s+tokens\s+per\s+request:\s*"
                         r"(\d[\d,]*(?:\.\d+)?)x")
OVERRIDE = re.compile(r"Overriding num_gpu_blocks=(\d+) with num_gpu_blocks_override=(\d+)")
# V1 0.9.0+ once the engine is up (v1/metrics/loggers.py `log_engine_initialized`; "N Engines:"
# with data parallelism): the pool's final block count, after any override
ENGINE_BLOCKS = re.compile(r"cache_config_info with initialization after num_gpu_blocks is:\s*"
                           + INT)
AUTOFIT_REDUCED = re.compile(r"Auto-fit max_model_len: reduced from (\d+) to (\d+)")
AUTOFIT_FULL = re.compile(r"Auto-fit max_model_len: full model context length (\d+) fits")
CPU_KV = re.compile(r"(Auto|Explicitly) set \(" + NUM + "/" + NUM + r"\) GiB for KV cache on node"
                    r" (\d+)(?:, with " + NUM + r" GiB requested memory for the worker\.\s*"
                    + NUM + r" GiB memory was consumed)?")

# ---- CUDA graphs and the suggestion ------------------------------------------------------
GRAPH_ESTIMATE = re.compile(r"Estimated CUDA graph memory:\s*" + NUM + r"\s*GiB")
GRAPH_DONE = re.compile(r"Graph capturing finished in\s*" + NUM + r"\s*secs?(?:,\s*took\s*"
                        + NUM + r"\s*GiB)?")
GRAPH_POOL = re.compile(r"CUDA graph pool memory:\s*" + NUM + r"\s*GiB \(actual\),\s*" + NUM
                        + r"\s*GiB \(estimated\)")
GRAPH_CAPTURING = re.compile(r"(?i)captur\w*\s+(?:cuda\s*graph|cudagraph)|cuda[- ]?graphs?\s+"
                             r"captur|\bcapturing\s+(?:full|piecewise)")
SUGGEST_HEAD = re.compile(r"Free memory on device(?:\s+\S+)?\s+\(" + NUM + "/" + NUM
                          + r" GiB\) on startup\.\s+Desired GPU memory utilization is\s+\("
                          + NUM + r",\s*" + NUM + r" GiB\)")
SUGGEST_OLD = re.compile(r"Actual usage is\s+" + NUM + r" GiB for weight,\s*" + NUM
                         + r" GiB for peak activation,\s*" + NUM
                         + r" GiB for non-torch memory,\s*and\s+" + NUM + r" GiB for CUDAGraph")
SUGGEST_NEW = re.compile(r"Actual usage is\s+" + NUM + r" GiB for consumed memory\s*\(weights"
                         r"\s*\+\s*non-torch\),\s*" + NUM + r" GiB for peak activation,\s*and\s+"
                         + NUM + r" GiB for CUDAGraph")
SUGGEST_BYTES = re.compile(r"--kv-cache-memory=(\d+)")
SUGGEST_CURRENT = re.compile(r"Current kv cache memory in use is\s+" + NUM + r"\s*(GiB|bytes)")
INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took\s+" + NUM)
SERVER_UP = re.compile(r"Starting vLLM (?:API )?server|Application startup complete")

# ---- serving stats -----------------------------------------------------------------------
STATS_V1 = re.compile(r"Running: (\d+) reqs, (?:Swapped: (\d+) reqs, )?(?:Waiting|Pending): (\d+) "
                      r"reqs, (?:Preemptions: (\d+), )?(?:\w+ )?KV cache usage: " + NUM + "%")
RUNNING = re.compile(r"Running:\s*(\d+)\s*reqs")
WAITING = re.compile(r"(?:Waiting|Pending):\s*(\d+)\s*reqs")
SWAPPED = re.compile(r"Swapped:\s*(\d+)\s*reqs")
KV_USAGE = re.compile(r"(?:\b\w+ )?KV cache usage:\s*" + NUM + "%")
PREEMPTIONS = re.compile(r"Preemptions:\s*(\d+)")

# ---- errors (§10) ------------------------------------------------------------------------
FREE_LOW = re.compile(r"Free memory on device(?:\s+(\S+))?\s+\(" + NUM + "/" + NUM + r" GiB\) on"
                      r"\s+startup is less than\s+(the engine's budget|desired)[^(]*\(" + NUM
                      + r",\s*" + NUM + r" GiB\)")
EXTERNAL = re.compile(r"Externally held weights on device\s+(\S+)\s+\(" + NUM + "/" + NUM
                      + r" GiB\) exceed the desired GPU memory utilization\s+\(" + NUM + r",\s*"
                      + NUM + r" GiB\)")
CPU_LOW = re.compile(r"Available memory on node (\d+) \(" + NUM + "/" + NUM + r" GiB\) on startup"
                     r" is less than desired CPU memory utilization \(" + NUM + r",\s*" + NUM
                     + r" GiB\)")
CPU_KV_LOW = re.compile(r"Available memory on node (\d+) \(" + NUM + "/" + NUM + r" GiB\) on kv"
                        r" cache allocation is less than requested memory for kv \(" + NUM
                        + r" GiB\)")
FIT = re.compile(r"To serve at least one request with the models?'s max seq len\s*\((\d+)\),?\s*"
                 r"\(?" + NUM + r"\s*(GiB|GB) KV cache is needed,\s*which is larger than the"
                 r"\s+available KV cache memory\s*\(" + NUM + r"\s*(GiB|GB)\)")
# NOTE: the message's head alone (an excerpt cut mid-message) still names the failure
FIT_HEAD = re.compile(r"To serve at least one request with the models?'s max seq len\s*\((\d+)\)")
FIT_ESTIMATE = re.compile(r"estimated maximum model length is\s+(\d+)")
FIT_V0 = re.compile(r"max seq len \((\d+)\) is larger than the maximum number of\s+tokens that"
                    r"\s+can be stored in KV cache \((\d+)\)")
SAMPLER = re.compile(r"out of memory occurred when warming up (sampler|pooler) with (\d+)")
MAMBA = re.compile(r"max_num_seqs \((\d+)\) exceeds available Mamba cache blocks(?: \((\d+)\))?")
PROFILE_ERR = re.compile(r"Error in memory profiling\.\s*Initial free memory\s+" + NUM
                         + r"\s*GiB, current free memory\s+" + NUM + r"\s*GiB")
# ... the older forms: free memory in bytes (v0 0.5.4-0.6.6, v1 0.7.0-0.9.0), used memory in
# bytes (v0 0.7.0-0.10.2), none (v0 0.4.0-0.5.3)
PROFILE_ERR_BYTES = re.compile(r"Error in memory profiling\.\s*Initial (free|used) memory\s+(\d+)"
                               r",\s*current(?:ly)? (?:free|used) memory\s+(\d+)")
PROFILE_ERR_BARE = re.compile(r"Error in memory profiling\.")
SWAP = re.compile(r"Too large swap space\.\s*" + NUM + r" GiB out of the " + NUM + r" GiB")
MAX_LEN_CONFIG = re.compile(r"User-specified max_model_len \((\d+)\) is greater than the derived")
# vLLM rejecting --block-size: argparse choices (<= 0.17), the v1 CUDA attention backends
# (not a multiple of 16), pydantic (<= 0 from 0.23).
BLOCK_SIZE = re.compile(r"argument --block-size: invalid choice: '?(-?\d+)|Block size must be a "
                        r"multiple of 16|No common block size for (\d+)|No valid attention "
                        r"backend found.*block_size not supported|CacheConfig\s+block_size\s+"
                        r"Input should be greater than 0")
SHM = re.compile(r"Insufficient space in /dev/shm|/dev/shm\S*:? (?:No space left|too small)"
                 r"|\bBus error\b")
# vLLM 0.20+'s KV offloading buffer (one /dev/shm file): "... 409594 MiB required, 204800 MiB
# free" (v1/kv_offload/cpu/shared_offload_region.py)
SHM_NEED = re.compile(r"Insufficient space in /dev/shm: (\d+) MiB required, (\d+) MiB free")
# a separate draft LM refused by the release (0.10-0.16), or v1 forced where 0.9 falls back
SPEC_CONFIG = re.compile(r"Draft model speculative decoding is not supported yet|Speculative "
                         r"decoding with draft model is not supported yet|Unsupported "
                         r"speculative method: '[^']*'|VLLM_USE_V1=1 is not supported with "
                         r"Speculative Decoding")
# --decode-context-parallel-size refused (config/parallel.py, config/model.py, the KV specs)
DCP_CONFIG = re.compile(r"must be divisible by ?dcp_size=\d+|DCP not support (?:sliding window"
                        r"|hybrid attn)|Decode context parallelism for GQA/MQA requires|decode "
                        r"context parallel size must less than|Total number of q per kv attn "
                        r"heads|decode-context-parallel-size`? \(\d+\) exceeds the maximum|DCP "
                        r"requires attention impls to return the softmax lse")
DISTRIBUTED = re.compile(r"NCCL error|nccl\w*Error|Dist(?:Backend|Network|Store)Error|collective"
                         r" operation timeout|Watchdog caught|NCCL WARN|ProcessGroupNCCL.*"
                         r"(?:[Tt]imeout|[Ee]rror|[Aa]bort)|TCPStore.*(?:refused|timed out|"
                         r"[Ee]rror)|custom.?all.?reduce(?!.*\bis disabled because\b)"
                         r".*(?:fail|[Ee]rror)")
# vLLM turns its custom all-reduce off at start-up (no P2P / NVLink between the ranks, a
# group across nodes); its buffers then take no memory (a WARNING, not a failure).
CUSTOM_AR_OFF = re.compile(r"Custom allreduce is disabled")
ENGINE_FAILED = re.compile(r"EngineCore failed to start|Engine core initialization failed|"
                           r"Error executing method '?(\w+)|WorkerProc failed to start|"
                           r"EngineDeadError|died unexpectedly|Worker failed with error")
CUDA_ERROR = re.compile(r"CUDA error: (?!out of memory)([^.\n]{3,80})")
EXCEPTION = re.compile(r"^\s*(?:(?:ERROR|CRITICAL)\b[^\]]*\]\s*)?(?:\[rank\d+\]:\s*)?`?"
                       r"((?:\w+\.)*[A-Z]\w*(?:Error|Exception)):\s+(\S.{0,300})")
ERROR_LEVEL = re.compile(r"^\s*(?:ERROR|CRITICAL)\b")

# ---- PyTorch out-of-memory text ----------------------------------------------------------
_SIZE = NUM + r"\s*(GiB|MiB|KiB|GB|MB|bytes)"
OOM_ANY = re.compile(r"\b(?:CUDA|HIP|XPU|NPU|MPS) out of memory|OutOfMemoryError|Tried to allocate"
                     r"|error: out of memory|hipErrorOutOfMemory|out of memory\. Tried")
OOM_DEVICE = re.compile(r"\b(CUDA|HIP|XPU|NPU|MPS)\s+out of memory")
OOM_TRIED = re.compile(r"Tried to allocate\s+" + _SIZE)
OOM_TOTAL = re.compile(r"GPU (\d+) has a total capacity of\s+" + _SIZE + r"\s+of which\s+" + _SIZE
                       + r"\s+is free")
OOM_IN_USE = re.compile(r"this process has\s+" + _SIZE + r"\s+memory in use")
OOM_ALLOCATED = re.compile(r"Of the allocated memory\s+" + _SIZE + r"\s+is allocated by PyTorch")
OOM_RESERVED = re.compile(r"and\s+" + _SIZE + r"\s+is reserved by PyTorch but unallocated")
OOM_OTHER = re.compile(r"Process \d+ has\s+" + _SIZE + r"\s+memory in use")
OOM_OLD = re.compile(r"\(GPU (\d+);\s*" + _SIZE + r" total capacity;\s*" + _SIZE
                     + r" already allocated;\s*" + _SIZE + r" free")

UNIT_GIB = {"GiB": 1.0, "GB": 1.0, "MiB": 1 / 1024, "MB": 1 / 1024, "KiB": 1 / 1024 ** 2,
            "bytes": 1 / 1024 ** 3}

# A continuation line of a wrapped message never looks like the start of a log record.
NEW_RECORD = re.compile(r"^\s*(?:\(\w[^)]*pid=\d+\)|\[[^\]]{1,64}\]\s*\(|(?:INFO|WARNING|ERROR|"
                        r"DEBUG|CRITICAL)\b|\d\d:\d\d:\d\d|\d{4}-\d\d-\d\d|[|#>*-]\s|Traceback)")

# A traceback frame (`File "…/gpu_model_runner.py", line 6914, in initialize_kv_cache_tensors`):
# the function name.
FRAME = re.compile(r'File "[^"]*", line \d+, in (\w+)\b')
