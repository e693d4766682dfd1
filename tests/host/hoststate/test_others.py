"""Leaving another live trial's resources out of a snapshot, over constructed sources:
an imitation cgroup2 mount, /proc/net tables and a /proc of fake processes (their
`fd/` links and `cgroup` files), and real leases held by real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.trial.hoststate import host_state_record
from host.hoststate import Sources, compare, take_snapshot
from host.hoststate.attribution import Attribution, Owner, scan_processes
from host.hoststate.others import live_trial_tags
from host.hoststate.sockets import read_listening_sockets
from host.vm.lease import TrialLease

OTHER = "0123456789abcdef"
SECOND = "00112233aabbccdd"
OWN = "fedcba9876543210"
HEADER = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
    "   uid  timeout inode"
)
HEADER6 = (
    "  sl  local_address                         remote_address                        st"
    " tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
)


def _row(port: int, inode: int) -> str:
    return (
        f"   0: 0100007F:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
        f"     0        0 {inode} 1 0000000000000000 100 0 0 10 0"
    )


def _proc_net(root: Path, rows: list[str]) -> Path:
    net = root / "net"
    net.mkdir(parents=True, exist_ok=True)
    (net / "tcp").write_text("\n".join([HEADER, *rows]) + "\n")
    (net / "udp").write_text(HEADER + "\n")
    for name in ("tcp6", "udp6"):
        (net / name).write_text(HEADER6 + "\n")
    for name in ("route", "ipv6_route"):
        (net / name).write_bytes((Path("/proc/self/net") / name).read_bytes())
    return net


def _process(proc: Path, pid: int, inodes: list[int], cgroup: str | None) -> None:
    """A fake process: `fd/N` links to `socket:[inode]`, and its cgroup file (v1-style:
    the harness cgroup in memory and pids, the root elsewhere)."""
    fd = proc / str(pid) / "fd"
    fd.mkdir(parents=True)
    for number, inode in enumerate(inodes, start=3):
        (fd / str(number)).symlink_to(f"socket:[{inode}]")
    (fd / "0").symlink_to("/dev/null")
    lines = ["9:name=systemd:/", "1:cpu:/"]
    if cgroup is not None:
        lines += [f"4:memory:/some/prefix/harness/{cgroup}", f"8:pids:/harness/{cgroup}"]
    (proc / str(pid) / "cgroup").write_text("\n".join(lines) + "\n")


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    root.mkdir()
    return root


def test_a_socket_held_only_by_another_live_trial_is_left_out(tmp_path: Path, proc: Path) -> None:
    net = _proc_net(tmp_path, [_row(4000, 101), _row(4001, 102), _row(4002, 103), _row(22, 104)])
    _process(proc, 10, [101], f"trial-{OTHER}")  # QEMU of the other trial: out
    _process(proc, 11, [102], f"worker-{OTHER}")  # another of its processes: out
    _process(proc, 12, [102], f"trial-{OTHER}")
    _process(proc, 13, [103], f"trial-{OWN}")  # this trial's own: in
    _process(proc, 14, [104], None)  # sshd of the host: in
    read = read_listening_sockets(net, frozenset({OTHER}), proc=proc)
    assert read.state == "present" and read.canonical == [
        ["tcp", "127.0.0.1", 22],
        ["tcp", "127.0.0.1", 4002],
    ]
    assert (read.count, read.excluded, read.excluded_tags) == (2, 2, frozenset({OTHER}))
    # The control: with no live other trial, nothing is left out.
    control = read_listening_sockets(net, frozenset(), proc=proc)
    assert (control.count, control.excluded, control.excluded_tags) == (4, 0, frozenset())


@pytest.mark.parametrize(
    "holders",
    [
        [(10, f"trial-{OTHER}"), (11, None)],  # also held outside any trial cgroup
        [(10, f"trial-{OTHER}"), (11, f"trial-{SECOND}")],  # held by two trials
        [(10, f"trial-{SECOND}")],  # a trial that is not live
        [(10, f"other-{OTHER}")],  # a cgroup name no trial uses
        [],  # no holder found (it ended during the scan)
    ],
)
def test_a_socket_not_proven_another_live_trials_stays(
    tmp_path: Path, proc: Path, holders: list[tuple[int, str | None]]
) -> None:
    net = _proc_net(tmp_path, [_row(4000, 101)])
    for pid, cgroup in holders:
        _process(proc, pid, [101], cgroup)
    read = read_listening_sockets(net, frozenset({OTHER}), proc=proc)
    assert (read.count, read.excluded) == (1, 0)


def test_one_address_held_by_an_excluded_and_a_kept_socket_stays(
    tmp_path: Path, proc: Path
) -> None:
    net = _proc_net(tmp_path, [_row(4000, 101), _row(4000, 102)])  # SO_REUSEPORT pair
    _process(proc, 10, [101], f"trial-{OTHER}")
    _process(proc, 11, [102], None)
    read = read_listening_sockets(net, frozenset({OTHER}), proc=proc)
    assert read.canonical == [["tcp", "127.0.0.1", 4000]]
    assert read.excluded == 1


def _socket_owner(proc: Path, live: frozenset[str]) -> Owner:
    table = scan_processes(proc, "harness", {101})
    return Attribution(table, live).sockets({101})[101]


def test_a_process_in_cgroups_of_two_tags_owns_nothing(proc: Path) -> None:
    live = frozenset({OTHER, SECOND})
    _process(proc, 10, [101], f"trial-{OTHER}")
    (proc / "10" / "cgroup").write_text(
        f"4:memory:/harness/trial-{OTHER}\n8:pids:/harness/trial-{SECOND}\n"
    )
    assert _socket_owner(proc, live).kind == "unattributed"
    (proc / "10" / "cgroup").write_text(f"4:memory:/harness/trial-{OTHER}\n")
    assert _socket_owner(proc, live) == Owner("other", OTHER)


def _cgroup_sources(tmp_path: Path, net: Path, proc: Path) -> tuple[Sources, Path]:
    root = tmp_path / "imitation-cgroup2"
    (root / "harness").mkdir(parents=True)
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(f"29 23 0:26 / {root} rw - cgroup2 cgroup2 rw\n")
    bin_dir = tmp_path / "no-firewall-tools"
    bin_dir.mkdir()
    (bin_dir / "nft").write_text("#!/bin/sh\necho 'table inet t {'; echo '}'\n")
    (bin_dir / "nft").chmod(0o755)
    sources = Sources(
        proc_net=net,
        proc=proc,
        resolv_conf=tmp_path / "resolv.conf",
        mountinfo=mountinfo,
        firewall_search_path=str(bin_dir),
    )
    return sources, root / "harness"


def test_another_live_trial_coming_and_going_leaves_host_state_unchanged(
    tmp_path: Path, proc: Path
) -> None:
    """The two-trial case: the other trial's cgroups and QEMU socket are there after and
    not before. Left out, the comparison is unchanged and the record says what was left
    out; not left out (the control), it is changed."""
    live = frozenset({OTHER})
    net = _proc_net(tmp_path, [_row(22, 104)])
    _process(proc, 14, [104], None)
    sources, parent = _cgroup_sources(tmp_path, net, proc)
    (parent / "unrelated").mkdir()
    before = take_snapshot(sources, live)
    (parent / f"trial-{OTHER}").mkdir()
    (parent / f"worker-{OTHER}").mkdir()
    _proc_net(tmp_path, [_row(22, 104), _row(4000, 101)])
    _process(proc, 10, [101], f"trial-{OTHER}")
    after = take_snapshot(sources, live)
    assert compare(before, after).overall == "unchanged"
    record = host_state_record(before, after)
    assert {f.result for f in record.facets()} == {"unchanged"}
    assert (record.cgroups.excluded_before, record.cgroups.excluded_after) == (0, 2)
    assert (
        record.listening_sockets.excluded_before,
        record.listening_sockets.excluded_after,
    ) == (0, 1)
    assert record.excluded_trials == (OTHER,)
    assert record.routes.excluded_after == record.firewall.excluded_after == 0

    control = host_state_record(take_snapshot(sources), take_snapshot(sources))
    assert control.excluded_trials == ()
    assert host_state_record(before, take_snapshot(sources)).cgroups.result == "changed"
    assert host_state_record(before, take_snapshot(sources)).listening_sockets.result == ("changed")


@pytest.mark.parametrize(
    "left_behind", [f"trial-{OWN}", f"worker-{OWN}", "trial-00000000deadbeef", "stray"]
)
def test_anything_else_left_behind_is_still_a_change(
    tmp_path: Path, proc: Path, left_behind: str
) -> None:
    """This trial's own cgroups, a dead trial's, and unnamed ones are never left out,
    even while another live trial's are."""
    live = frozenset({OTHER})
    net = _proc_net(tmp_path, [])
    sources, parent = _cgroup_sources(tmp_path, net, proc)
    before = take_snapshot(sources, live)
    (parent / f"trial-{OTHER}").mkdir()
    (parent / left_behind).mkdir()
    after = take_snapshot(sources, live)
    record = host_state_record(before, after)
    assert record.cgroups.result == "changed"
    assert record.cgroups.excluded_after == 1 and record.excluded_trials == (OTHER,)


def _hold(path: Path) -> subprocess.Popen[bytes]:
    """A real other process holding a flock on `path` until killed."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    return holder


def test_live_trial_tags_are_leases_held_by_live_processes(tmp_path: Path) -> None:
    root = tmp_path / "trials"
    root.mkdir()
    (root / f"lease-{SECOND}").write_text("")  # a lease nobody holds: a dead trial's
    (root / "lease-not-a-tag").write_text("")
    (root / f"harness-trial-{OTHER}-abcdefgh").mkdir()
    holder = _hold(root / f"lease-{OTHER}")
    try:
        with TrialLease(root, OWN):  # this trial's own, held by this process
            assert live_trial_tags(root, OWN) == frozenset({OTHER})
            assert live_trial_tags(root, "1111111111111111") == frozenset({OTHER, OWN})
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 5
    while live_trial_tags(root, OWN) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert live_trial_tags(root, OWN) == frozenset()  # the holder died: not live
    assert live_trial_tags(tmp_path / "missing", OWN) == frozenset()
    assert os.listdir(root)  # nothing was removed: this only reads
