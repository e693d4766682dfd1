"""The closed vocabulary's one mapping: each placement has exactly one channel."""

from __future__ import annotations

from typing import get_args

from receipts.vocabulary import Channel, Placement, channel_for


def test_every_placement_has_its_own_channel_and_every_channel_a_placement() -> None:
    channels = [channel_for(placement) for placement in get_args(Placement)]
    assert sorted(channels) == sorted(get_args(Channel))


def test_the_channels_are_the_ones_the_harness_builds() -> None:
    """host: QEMU guestfwd to the worker's Unix socket; guest: the guest's loopback."""
    assert channel_for("host") == "guestfwd_unix"
    assert channel_for("guest") == "guest_loopback"
    assert channel_for("none") == "none"
