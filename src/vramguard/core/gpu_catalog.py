"""GPU catalog: CUDA-reported totals, compute capability and nvidia-smi names.

Pure data plus a loose lookup. `total_bytes` is what `cudaMemGetInfo` / torch reports (the
`T` of vLLM's formulas), not the marketing size. Where a vLLM/torch total was seen in a
published log (bench/data/gpus.jsonl), that figure is used (`source="catalog"`). Otherwise the
total is derived from the nvidia-smi MiB figure minus a driver reservation of 512 MiB
(observed reservations: 450-770 MiB across H100/H200/B200/A100/RTX cards) and marked
`source="derived: nvidia-smi MiB - 512 MiB"`; expect about +-0.3 GiB on those.
"""

from __future__ import annotations

import difflib
import re

from .gpu import GpuSpec

_GIB = 1 << 30
_MIB = 1 << 20
SMI_RESERVATION_MIB = 512
_DERIVED = f"derived: nvidia-smi MiB - {SMI_RESERVATION_MIB} MiB"

# short name, CUDA total GiB (None: derive), nvidia-smi MiB, compute capability, vendor, uma,
# full nvidia-smi name, aliases
_ROWS: tuple[tuple, ...] = (
    ("A100-40GB", 39.49, 40960, (8, 0), "nvidia", False, "NVIDIA A100-SXM4-40GB",
     ("NVIDIA A100-PCIE-40GB", "A100 40GB", "A100-40G")),
    ("A100-80GB", 79.25, 81920, (8, 0), "nvidia", False, "NVIDIA A100-SXM4-80GB",
     ("NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB", "A100 80GB", "A100", "A100-80G")),
    ("H100-80GB", 79.19, 81559, (9, 0), "nvidia", False, "NVIDIA H100 80GB HBM3",
     ("H100", "H100-SXM", "H100 SXM", "H100-80G", "NVIDIA H100")),
    ("H100-PCIe", 79.19, 81559, (9, 0), "nvidia", False, "NVIDIA H100 PCIe",
     ("H100 PCIe", "H100-PCIE-80GB")),
    ("H100-NVL", None, 95830, (9, 0), "nvidia", False, "NVIDIA H100 NVL", ("H100NVL",)),
    ("H200", 139.81, 143771, (9, 0), "nvidia", False, "NVIDIA H200",
     ("H200-141GB", "NVIDIA H200 NVL", "H200 NVL")),
    ("H20", 95.33, 97871, (9, 0), "nvidia", False, "NVIDIA H20", ("H20-96GB",)),
    # NOTE: not unified memory for vLLM: GH200's HBM is a discrete device (not
    # `is_integrated`); cudaMemGetInfo reports it (a GH200 log: "Free memory on device
    # cuda:0 (72.43/95.0 GiB)")
    ("GH200", 95.0, None, (9, 0), "nvidia", False, "NVIDIA GH200 480GB",
     ("GH200-96GB", "NVIDIA GH200 96GB HBM3")),
    ("B200", 178.35, 183359, (10, 0), "nvidia", False, "NVIDIA B200", ("B200-180GB",)),
    # NOTE: a vLLM 0.26 log on a RunPod B300 printed "Free memory on device (267.08/267.69 GiB)"
    # beside nvidia-smi's 275,040 MiB (blog.john-pfeiffer.com, 2026-08-04).
    ("B300", 267.69, 275040, (10, 3), "nvidia", False, "NVIDIA B300 SXM6 AC", ("B300-288GB",)),
    ("L4", 22.05, 23034, (8, 9), "nvidia", False, "NVIDIA L4", ()),
    ("L40S", 44.39, 46068, (8, 9), "nvidia", False, "NVIDIA L40S", ()),
    ("L40", 44.40, 46068, (8, 9), "nvidia", False, "NVIDIA L40", ()),
    ("A40", 44.42, 46068, (8, 6), "nvidia", False, "NVIDIA A40", ()),
    ("A10G", 22.20, 23028, (8, 6), "nvidia", False, "NVIDIA A10G", ()),
    ("A10", 22.18, 23028, (8, 6), "nvidia", False, "NVIDIA A10", ()),
    ("A6000", None, 49140, (8, 6), "nvidia", False, "NVIDIA RTX A6000", ("RTX A6000",)),
    ("RTX-6000-Ada", None, 49140, (8, 9), "nvidia", False, "NVIDIA RTX 6000 Ada Generation",
     ("RTX 6000 Ada", "RTX6000 Ada")),
    ("RTX-PRO-6000", 95.01, None, (12, 0), "nvidia", False,
     "NVIDIA RTX PRO 6000 Blackwell Server Edition", ("RTX PRO 6000 Server",)),
    ("RTX-PRO-6000-WS", None, 97887, (12, 0), "nvidia", False,
     "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
     ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "RTX PRO 6000 Max-Q")),
    ("RTX-PRO-4500", 31.38, 32623, (12, 0), "nvidia", False,
     "NVIDIA RTX PRO 4500 Blackwell Server Edition", ()),
    ("T4", 14.58, 15360, (7, 5), "nvidia", False, "Tesla T4", ("NVIDIA Tesla T4", "T4-16GB")),
    ("V100-16GB", None, 16160, (7, 0), "nvidia", False, "Tesla V100-SXM2-16GB",
     ("V100 16GB", "Tesla V100-PCIE-16GB")),
    ("V100-32GB", 31.74, 32510, (7, 0), "nvidia", False, "Tesla V100-SXM2-32GB",
     ("V100", "V100 32GB", "Tesla V100-PCIE-32GB", "NVIDIA Tesla V100 32GB")),
    ("RTX-3090", 23.56, 24576, (8, 6), "nvidia", False, "NVIDIA GeForce RTX 3090", ("3090",)),
    ("RTX-4090", 23.52, 24564, (8, 9), "nvidia", False, "NVIDIA GeForce RTX 4090",
     ("4090", "RTX-4090D", "NVIDIA GeForce RTX 4090 D")),
    ("RTX-5090", 31.36, 32607, (12, 0), "nvidia", False, "NVIDIA GeForce RTX 5090",
     ("5090", "NVIDIA GeForce RTX 5090 D")),
    ("RTX-5090-Laptop", 22.36, None, (12, 0), "nvidia", False,
     "NVIDIA GeForce RTX 5090 Laptop GPU", ()),
    ("RTX-5070Ti", None, 16303, (12, 0), "nvidia", False, "NVIDIA GeForce RTX 5070 Ti", ()),
    ("RTX-4080", None, 16376, (8, 9), "nvidia", False, "NVIDIA GeForce RTX 4080", ("4080",)),
    ("RTX-4070", None, 12282, (8, 9), "nvidia", False, "NVIDIA GeForce RTX 4070", ("4070",)),
    # NOTE: the 8 GB (laptop) 4070 printed a 7.65 GiB total in a published log.
    ("RTX-4070-8GB", 7.65, 8188, (8, 9), "nvidia", False, "NVIDIA GeForce RTX 4070 Laptop GPU",
     ("RTX 4070 Laptop",)),
    ("RTX-3080", None, 10240, (8, 6), "nvidia", False, "NVIDIA GeForce RTX 3080", ("3080",)),
    ("RTX-2080Ti", None, 11264, (7, 5), "nvidia", False, "NVIDIA GeForce RTX 2080 Ti",
     ("2080Ti", "RTX 2080 Ti")),
    ("MI300X", 191.98, None, None, "amd", False, "AMD Instinct MI300X", ("MI300",)),
    ("MI250", 63.98, 65520, None, "amd", False, "AMD Instinct MI250X/MI250", ("MI250X",)),
    ("MI50-32GB", 31.98, None, None, "amd", False, "AMD Instinct MI50 32GB", ("MI50",)),
    ("GB10", 121.69, None, (12, 1), "nvidia", True, "NVIDIA GB10", ("DGX Spark",)),
    # NOTE: the rows below (and the totals of L40, A40, A10, A10G, MI250) were added from
    # published nvidia-smi / rocm-smi tables and torch/vLLM totals (the "GPU 0 has a total
    # capacity of X GiB" of an OOM); the compute capability from NVIDIA's published table:
    # A800 (vllm-project/vllm#41519, dexmal/dexbotic#41), L20 (vllm#14011), A30
    # (google/RB-Modulation#5), GB200 (vllm#43951), MI325X (vllm#41962), MI250 (ROCm#3579),
    # L40 (QwenLM/Qwen3-VL#2097), A10 (OpenBMB/MiniCPM-V#640); the others from public files'
    # captured `nvidia-smi --query-gpu=name,memory.total` output.
    ("A800-80GB", None, 81920, (8, 0), "nvidia", False, "NVIDIA A800-SXM4-80GB",
     ("NVIDIA A800 80GB PCIe", "A800", "A800 80GB", "A800-SXM4-80GB")),
    ("A800-40GB", None, 40960, (8, 0), "nvidia", False, "NVIDIA A800-SXM4-40GB",
     ("A800 40GB",)),
    ("H800", None, 81559, (9, 0), "nvidia", False, "NVIDIA H800",
     ("NVIDIA H800 PCIe", "H800 PCIe", "H800-80GB")),
    ("L20", 44.52, 46068, (8, 9), "nvidia", False, "NVIDIA L20", ()),
    ("A30", 23.53, 24576, (8, 0), "nvidia", False, "NVIDIA A30", ("A30-24GB",)),
    ("A16", None, 15356, (8, 6), "nvidia", False, "NVIDIA A16", ()),
    ("A2", None, 15356, (8, 6), "nvidia", False, "NVIDIA A2", ()),
    ("GB200", 184.31, 189471, (10, 0), "nvidia", False, "NVIDIA GB200", ()),
    ("RTX-A5000", 23.68, 24564, (8, 6), "nvidia", False, "NVIDIA RTX A5000", ("A5000",)),
    ("RTX-A4000", 15.61, 16376, (8, 6), "nvidia", False, "NVIDIA RTX A4000", ("A4000",)),
    ("RTX-4000-Ada", None, 20475, (8, 9), "nvidia", False, "NVIDIA RTX 4000 Ada Generation",
     ("RTX 4000 Ada",)),
    ("RTX-2000-Ada", None, 16380, (8, 9), "nvidia", False, "NVIDIA RTX 2000 Ada Generation",
     ("RTX 2000 Ada",)),
    ("RTX-5080", None, 16303, (12, 0), "nvidia", False, "NVIDIA GeForce RTX 5080", ("5080",)),
    ("RTX-5070", None, 12227, (12, 0), "nvidia", False, "NVIDIA GeForce RTX 5070", ("5070",)),
    # NOTE: the 8 GB 5060 Ti prints the same name: give its size ("RTX 5060 Ti 8GB" asks for
    # --gpu-memory-gib)
    ("RTX-5060Ti", None, 16311, (12, 0), "nvidia", False, "NVIDIA GeForce RTX 5060 Ti",
     ("5060 Ti",)),
    ("RTX-4080-SUPER", None, 16376, (8, 9), "nvidia", False, "NVIDIA GeForce RTX 4080 SUPER",
     ("4080 SUPER", "RTX 4080S")),
    ("RTX-4070Ti-SUPER", None, 16376, (8, 9), "nvidia", False,
     "NVIDIA GeForce RTX 4070 Ti SUPER", ("4070 Ti SUPER",)),
    ("RTX-3060", None, 12288, (8, 6), "nvidia", False, "NVIDIA GeForce RTX 3060", ("3060",)),
    ("MI325X", 255.98, None, None, "amd", False, "AMD Instinct MI325X", ()),
    ("MI355X", 287.98, None, None, "amd", False, "AMD Instinct MI355X", ()),
    ("MI210", None, 65520, None, "amd", False, "AMD Instinct MI210", ()),
    ("Radeon-PRO-W7900", 44.98, None, None, "amd", False, "AMD Radeon PRO W7900", ("W7900",)),
    ("Jetson-AGX-Orin", 29.96, None, (8, 7), "nvidia", True, "NVIDIA Jetson AGX Orin",
     ("Orin", "Jetson Orin")),
)

# Free memory at vLLM's snapshot on unified-memory parts as public startups logged it ("Free
# memory on device (F/T GiB)", GiB): the OS and every other process share that memory, so it
# is well below the total (docs/accuracy.md, twenty-second session, names the sources).
UMA_FREE_SEEN: dict[str, tuple[tuple[float, float], ...]] = {
    "GB10": ((105.9, 121.69), (110.37, 121.69), (112.26, 119.63), (114.54, 121.69),
             (115.94, 121.69), (116.05, 121.69)),
}


def uma_free_share(gpu: GpuSpec) -> tuple[float, float, float] | None:
    """(lowest, median, highest) free share of the total at vLLM's start that public
    startups on this unified-memory part logged (`UMA_FREE_SEEN`), or None (a discrete GPU,
    or no such logs)."""
    seen = UMA_FREE_SEEN.get(gpu.name) if gpu.uma else None
    if not seen:
        return None
    shares = sorted(free / total for free, total in seen)
    n = len(shares)
    mid = shares[n // 2] if n % 2 else (shares[n // 2 - 1] + shares[n // 2]) / 2
    return shares[0], mid, shares[-1]


def _spec(row: tuple) -> GpuSpec:
    name, cuda_gib, smi_mib, cc, vendor, uma, full, aliases = row
    if cuda_gib is not None:
        total, source = int(round(cuda_gib * _GIB)), "catalog"
    else:
        total, source = (smi_mib - SMI_RESERVATION_MIB) * _MIB, _DERIVED
    return GpuSpec(name=name, total_bytes=total, full_name=full, compute_capability=cc,
                   vendor=vendor, uma=uma, aliases=(full,) + tuple(aliases), source=source)


CATALOG: tuple[GpuSpec, ...] = tuple(_spec(r) for r in _ROWS)

_NOISE = re.compile(r"\b(nvidia|geforce|tesla|amd|instinct)\b|\d+gb hbm\d?e?|hbm\d?e?|[\s_\-()]+")


def _norm(name: str) -> str:
    """Loose key: case, spaces, dashes, vendor words and '80GB HBM3'-style suffixes ignored."""
    key = _NOISE.sub("", name.lower())
    return key.replace("gb", "g")


def _index() -> dict[str, GpuSpec]:
    idx: dict[str, GpuSpec] = {}
    for spec in CATALOG:
        idx.setdefault(_norm(spec.name), spec)
    for spec in CATALOG:
        for alias in spec.aliases:
            idx.setdefault(_norm(alias), spec)
    return idx


_INDEX = _index()


def lookup_gpu(name: str) -> GpuSpec:
    """The catalog entry for `name` (short name, nvidia-smi name or alias, matched loosely).

    Raises UsageError with close suggestions when nothing matches.
    """
    from .errors import UsageError

    key = _norm(name or "")
    if key in _INDEX:
        return _INDEX[key]
    sized = _by_size(name or "")
    if isinstance(sized, GpuSpec):
        return sized
    if sized is not None:
        raise UsageError(f"unknown GPU {name!r}", where="--gpu", fix=sized)
    close = difflib.get_close_matches(key, list(_INDEX), n=3, cutoff=0.6)
    names = sorted({_INDEX[k].name for k in close})
    hint = f"Did you mean {', '.join(names)}? " if names else ""
    raise UsageError(f"unknown GPU {name!r}", where="--gpu",
                     fix=f"{hint}Known: {', '.join(g.name for g in CATALOG)}; or pass "
                         "--gpu-memory-gib with the total CUDA reports")


_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:gib|gb|g)\b", re.I)
_SMI_MIB = {row[0]: row[2] for row in _ROWS}


def _by_size(name: str) -> GpuSpec | str | None:
    """A name with its memory size ("RTX 4090 24GB"): the entry when the size is that card's
    (within 10 %, 2 GB at least); else what to do instead (a text); None without a size."""
    m = _SIZE.search(name)
    if not m:
        return None
    spec = _INDEX.get(_norm(name[:m.start()] + name[m.end():]))
    if spec is None:
        return None
    given = float(m.group(1))
    smi = _SMI_MIB.get(spec.name)
    size = smi / 1024 if smi else spec.total_bytes / _GIB
    if abs(size - given) <= max(2.0, 0.1 * given):
        return spec
    return (f"the catalog's {spec.name} has {size:.0f} GB, not {m.group(0).strip()}: pass "
            f"--gpu {spec.name} --gpu-memory-gib with the total CUDA reports for your card")


def list_gpus() -> tuple[GpuSpec, ...]:
    """Every catalog GPU, in catalog order."""
    return CATALOG
