"""CUDA_VISIBLE_DEVICES: which of the GPUs NVML lists will vLLM (CUDA) see, in which order.

CUDA accepts ordinals (`0,2`), GPU UUIDs (`GPU-8f3c...`, a unique prefix is enough) and MIG
UUIDs (`MIG-...`, or the legacy `MIG-GPU-<uuid>/<gi>/<ci>`). CUDA silently stops at the first
entry it cannot use and hides everything after it; vramguard refuses such a value instead
(UsageError), because a silently shortened list is exactly how TP launches go wrong.
Pure functions; NVML is not touched here.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from ..core.gpu import GpuState
from ..errors import UsageError

ENV = "CUDA_VISIBLE_DEVICES"
_UUID_RE = re.compile(r"^(GPU|MIG)-[0-9A-Za-z][0-9A-Za-z\-/]*$")


def parse_visible_devices(value: str) -> tuple[int | str, ...]:
    """The entries of a CUDA_VISIBLE_DEVICES value: ints (ordinals) or UUID strings.

    Raises UsageError for an empty value, `-1`, malformed or repeated entries.
    """
    text = value.strip()
    if not text:
        raise UsageError("CUDA_VISIBLE_DEVICES is set but empty: CUDA will see no GPU",
                         where=ENV, fix="Unset it to use every GPU, or list GPUs such as `0,1`")
    out: list[int | str] = []
    for raw in text.split(","):
        tok = raw.strip()
        if re.fullmatch(r"\d+", tok):
            entry: int | str = int(tok)
        elif _UUID_RE.match(tok):
            entry = tok
        elif re.fullmatch(r"-\d+", tok):
            raise UsageError(f"entry {tok!r} hides every GPU after it from CUDA", where=ENV,
                             fix="List the GPUs vLLM should use, such as `0,1`")
        else:
            raise UsageError(f"malformed entry {tok!r} in {value!r} (CUDA would ignore it and "
                             "every entry after it)", where=ENV,
                             fix="Use ordinals (`0,1`) or UUIDs from `nvidia-smi -L` "
                                 "(`GPU-...`, `MIG-...`), comma-separated")
        if entry in out:
            raise UsageError(f"GPU {tok!r} is listed twice in {value!r}", where=ENV,
                             fix="List each GPU once")
        out.append(entry)
    return tuple(out)


def _match_uuid(gpus: Sequence[GpuState], token: str) -> GpuState:
    exact = [g for g in gpus if g.uuid and g.uuid.lower() == token.lower()]
    if exact:
        return exact[0]
    if "/" in token:   # MIG-GPU-<uuid>/<gi>/<ci>, the pre-R470 MIG naming
        raise UsageError(f"legacy MIG name {token!r} is not supported", where=ENV,
                         fix="Use the MIG-<uuid> names that `nvidia-smi -L` prints")
    prefix = [g for g in gpus if g.uuid and g.uuid.lower().startswith(token.lower())]
    if len(prefix) == 1:
        return prefix[0]
    known = ", ".join(g.uuid for g in gpus if g.uuid) or "none"
    if prefix:
        raise UsageError(f"{token!r} matches {len(prefix)} GPUs", where=ENV,
                         fix="Give more of the UUID")
    raise UsageError(f"no GPU has UUID {token!r}", where=ENV,
                     fix=f"UUIDs NVML sees: {known}")


def select_visible(gpus: Sequence[GpuState], value: str | None) -> list[GpuState]:
    """The CUDA devices, in CUDA order, that a process with CUDA_VISIBLE_DEVICES=`value`
    sees, out of `gpus` (NVML order, MIG instances expanded). None means unset: all of them.

    Ordinals count CUDA devices, i.e. positions in `gpus` (CUDA_DEVICE_ORDER=PCI_BUS_ID order,
    which is NVML's).
    """
    if value is None:
        return list(gpus)
    chosen: list[GpuState] = []
    for entry in parse_visible_devices(value):
        if isinstance(entry, int):
            if entry >= len(gpus):
                raise UsageError(f"there is no GPU {entry}: this machine has {len(gpus)} "
                                 "CUDA device(s)", where=ENV,
                                 fix=f"Use ordinals 0..{len(gpus) - 1}" if gpus else
                                 "Check `nvidia-smi`")
            g = gpus[entry]
        else:
            g = _match_uuid(gpus, entry)
        if any(g is c for c in chosen):
            raise UsageError(f"entry {entry!r} names a GPU already listed", where=ENV,
                             fix="List each GPU once")
        chosen.append(g)
    return chosen


def visible_value(env: Mapping[str, str]) -> str | None:
    """CUDA_VISIBLE_DEVICES from `env`, or None when unset."""
    return env.get(ENV)


def order_note(gpus: Sequence[GpuState], env: Mapping[str, str],
               value: str | None = None) -> str | None:
    """A warning when CUDA may order these GPUs differently from NVML: CUDA's default order
    is fastest-first, which differs from PCI (NVML) order on machines with mixed GPUs; and
    CUDA's enumeration of MIG instances by ordinal varies between CUDA releases."""
    if value is not None and not any(isinstance(e, int) for e in parse_visible_devices(value)):
        return None                    # chosen by UUID: the order cannot be mistaken
    names = {g.spec.full_name or g.spec.name for g in gpus}
    if len(names) > 1 and env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") != "PCI_BUS_ID":
        return ("this machine mixes GPU models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA "
                "may number the GPUs differently from nvidia-smi; set CUDA_DEVICE_ORDER=PCI_BUS_ID")
    if any(g.uuid and g.uuid.startswith("MIG-") for g in gpus):
        return ("MIG instances are selected by position here; name them by MIG UUID in "
                "CUDA_VISIBLE_DEVICES (`nvidia-smi -L`) to be sure which one vLLM gets")
    return None
