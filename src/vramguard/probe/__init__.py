"""Adapters for the live machine, and the launch gate built on them.

- `nvml.py`: NVML (the only importer of `pynvml`): `read_gpus()` -> GpuStates.
- `window.py`: a sampling window over `read_gpus` (min/median/max free, process events).
- `visible.py`: CUDA_VISIBLE_DEVICES parsing and GPU selection (pure).
- `host.py`: host RAM, cgroup memory limit, /dev/shm against vLLM's host needs.
- `gate.py`, `adjust.py`, `verdict.py`: the check's verdict, fixes and --adjust (pure, with
  the planner passed in).
"""
