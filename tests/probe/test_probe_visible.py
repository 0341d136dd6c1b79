"""CUDA_VISIBLE_DEVICES parsing and selection (probe/visible.py)."""

from __future__ import annotations

import pytest

from probe_fakes import state
from vramguard.errors import UsageError
from vramguard.probe.visible import order_note, parse_visible_devices, select_visible

GPUS = [state(0, uuid="GPU-8f3c0000-aaaa"), state(1, uuid="GPU-8f3d1111-bbbb"),
        state(2, uuid="GPU-12345678-cccc"), state(3, uuid="MIG-abcd-0001")]


def test_unset_means_all():
    assert select_visible(GPUS, None) == GPUS


def test_ordinals_in_the_given_order():
    assert [g.index for g in select_visible(GPUS, "2,0")] == [2, 0]
    assert [g.index for g in select_visible(GPUS, " 1 , 3 ")] == [1, 3]


def test_uuids_exact_prefix_and_mig():
    assert select_visible(GPUS, "GPU-12345678-cccc")[0].index == 2
    assert select_visible(GPUS, "GPU-8f3d")[0].index == 1            # unique prefix
    assert select_visible(GPUS, "MIG-abcd-0001,0")[0].index == 3


def test_parse_mixed():
    assert parse_visible_devices("0,GPU-abc,MIG-x") == (0, "GPU-abc", "MIG-x")


@pytest.mark.parametrize("value, text", [
    ("", "empty"),
    ("   ", "empty"),
    ("-1", "hides every GPU"),
    ("0,,1", "malformed"),
    ("0;1", "malformed"),
    ("gpu0", "malformed"),
    ("0,0", "listed twice"),
])
def test_malformed_values_are_usage_errors(value, text):
    with pytest.raises(UsageError, match=text) as exc:
        select_visible(GPUS, value)
    assert exc.value.where == "CUDA_VISIBLE_DEVICES"
    assert exc.value.fix


def test_unknown_index_uuid_and_ambiguous_prefix():
    with pytest.raises(UsageError, match="no GPU 7"):
        select_visible(GPUS, "7")
    with pytest.raises(UsageError, match="no GPU has UUID"):
        select_visible(GPUS, "GPU-ffff")
    with pytest.raises(UsageError, match="matches 2 GPUs"):
        select_visible(GPUS, "GPU-8f3")
    with pytest.raises(UsageError, match="already listed"):
        select_visible(GPUS, "0,GPU-8f3c")
    with pytest.raises(UsageError, match="legacy MIG"):
        select_visible(GPUS, "MIG-GPU-8f3c0000-aaaa/1/0")


def test_order_note_for_mixed_gpus():
    mixed = [state(0, name="H100-80GB"), state(1, name="A100-80GB")]
    assert order_note(mixed, {}) is not None
    assert order_note(mixed, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) is None
    assert order_note(mixed, {}, "GPU-1") is None
    assert order_note(GPUS[:3], {}) is None


def test_order_note_for_mig_by_position():
    assert "MIG UUID" in order_note(GPUS, {}, None)
    assert "MIG UUID" in order_note(GPUS, {}, "3")
    assert order_note(GPUS, {}, "MIG-abcd-0001") is None
