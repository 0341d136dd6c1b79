"""Adapters for the live machine: NVML (the only pynvml importer), cgroups, /dev/shm."""
