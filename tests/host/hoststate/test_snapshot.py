"""Snapshots of this host and of controlled copies of its sources."""

import dataclasses
import json
import socket
from pathlib import Path

import pytest

from host.hoststate import FACETS, HostSnapshot, Sources, compare, take_snapshot
from host.hoststate.compare import compare_facet
from host.hoststate.facet import FacetSnapshot
from host.hoststate.sockets import decode_address
from tests.host.hoststate.conftest import write_tool


def test_snapshot_twice_is_unchanged(sources: Sources) -> None:
    before = take_snapshot(sources)
    after = take_snapshot(sources)
    assert [f.state for f in before.facets] == ["present"] * len(FACETS)
    result = compare(before, after)
    assert result.overall == "unchanged"
    assert {f.outcome for f in result.facets} == {"unchanged"}
    # The fake nft's counters moved: the raw bytes differ, the rules did not.
    firewall = next(f for f in result.facets if f.name == "firewall")
    assert firewall.raw_outcome == "changed"


def test_result_holds_no_host_detail(sources: Sources) -> None:
    snap = take_snapshot(sources)
    text = json.dumps([dataclasses.asdict(f) for f in snap.facets])
    text += json.dumps(dataclasses.asdict(compare(snap, snap)))
    assert "/" not in text
    for detail in ("eth0", "lo", "0.0.0.0", "nameserver", "harness", "memory", "tcp dport"):
        assert f'"{detail}' not in text


def test_new_listening_tcp_socket_is_a_change(sources: Sources) -> None:
    before = take_snapshot(sources)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        during = take_snapshot(sources)
    result = compare(before, during)
    assert result.outcome("listening_sockets") == "changed"
    assert during.facet("listening_sockets").count == before.facet("listening_sockets").count + 1
    assert result.outcome("routes_ipv4") == "unchanged"
    assert compare(before, take_snapshot(sources)).outcome("listening_sockets") == "unchanged"


def test_new_bound_udp6_socket_is_a_change(sources: Sources) -> None:
    before = take_snapshot(sources)
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        s.bind(("::1", 0))
        during = take_snapshot(sources)
    assert compare(before, during).outcome("listening_sockets") == "changed"


def test_connected_sockets_are_not_listening_state(sources: Sources) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        before = take_snapshot(sources)
        with socket.create_connection(server.getsockname()) as client:
            accepted, _ = server.accept()
            with accepted, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                udp.bind(("127.0.0.1", 0))
                udp.connect(client.getsockname())  # a connected UDP socket is not listening
                during = take_snapshot(sources)
        # The connected UDP socket's bind is a listening row only while unconnected.
    assert compare(before, during).outcome("listening_sockets") == "unchanged"


def test_unreadable_sources_are_unread_not_unchanged(tmp_path: Path, sources: Sources) -> None:
    not_a_file = tmp_path / "a-directory"
    not_a_file.mkdir()
    broken = dataclasses.replace(
        sources,
        proc_net=tmp_path / "no-proc-net",
        resolv_conf=not_a_file,
        mountinfo=tmp_path / "no-mountinfo",
    )
    before, after = take_snapshot(broken), take_snapshot(broken)
    result = compare(before, after)
    for name in ("routes_ipv4", "routes_ipv6", "listening_sockets", "resolver", "cgroups"):
        assert before.facet(name).state == "unread", name
        assert before.facet(name).reason == "read_failed", name
        assert before.facet(name).sha256 is None
        assert result.outcome(name) == "unread", name
    assert result.outcome("firewall") == "unchanged"
    assert result.overall == "unread"
    # Unread on one side only is still unread.
    assert compare(take_snapshot(sources), after).outcome("routes_ipv4") == "unread"


def test_firewall_tool_missing_failing_or_hanging_is_unread(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    snap = take_snapshot(Sources(firewall_search_path=str(empty)))
    assert (snap.facet("firewall").state, snap.facet("firewall").reason) == (
        "unread",
        "tool_missing",
    )
    failing = tmp_path / "failing-bin"
    write_tool(failing, "nft", "echo 'netlink: Error: cache initialization failed' >&2\nexit 1\n")
    snap = take_snapshot(Sources(firewall_search_path=str(failing)))
    assert (snap.facet("firewall").state, snap.facet("firewall").reason) == (
        "unread",
        "tool_failed",
    )
    hanging = tmp_path / "hanging-bin"
    write_tool(hanging, "iptables-save", "exec sleep 30\n")
    snap = take_snapshot(Sources(firewall_search_path=str(hanging), firewall_timeout_s=0.3))
    assert (snap.facet("firewall").state, snap.facet("firewall").reason) == (
        "unread",
        "tool_timeout",
    )
    assert snap.facet("firewall").tool == "iptables_save"


def test_resolver_change_and_absence(tmp_path: Path, sources: Sources) -> None:
    conf = tmp_path / "resolv.conf"
    conf.write_bytes(b"nameserver 192.0.2.1\n")
    s = dataclasses.replace(sources, resolv_conf=conf)
    before = take_snapshot(s)
    conf.write_bytes(b"nameserver 192.0.2.1\n#\n")
    assert compare(before, take_snapshot(s)).outcome("resolver") == "changed"
    conf.unlink()
    gone = take_snapshot(s)
    assert gone.facet("resolver").state == "absent"
    assert compare(before, gone).outcome("resolver") == "changed"
    assert compare(gone, take_snapshot(s)).outcome("resolver") == "unchanged"


def _edit_column(path: Path, row: int, col: int, value: str, *, header: bool) -> None:
    lines = path.read_text().splitlines()
    index = row + (1 if header else 0)
    fields = lines[index].split()
    fields[col] = value
    lines[index] = " ".join(fields)
    path.write_text("\n".join(lines) + "\n")


def test_route_counters_are_ignored_but_route_fields_are_not(
    proc_net_copy: Path, sources: Sources
) -> None:
    s = dataclasses.replace(sources, proc_net=proc_net_copy)
    before = take_snapshot(s)
    assert before.facet("routes_ipv4").count >= 1
    assert before.facet("routes_ipv6").count >= 1
    _edit_column(proc_net_copy / "route", 0, 4, "77", header=True)  # RefCnt
    _edit_column(proc_net_copy / "route", 0, 5, "12345", header=True)  # Use
    _edit_column(proc_net_copy / "ipv6_route", 0, 6, "0000abcd", header=False)  # refcnt
    _edit_column(proc_net_copy / "ipv6_route", 0, 7, "0000abcd", header=False)  # use
    counters_only = compare(before, take_snapshot(s))
    assert counters_only.outcome("routes_ipv4") == "unchanged"
    assert counters_only.outcome("routes_ipv6") == "unchanged"
    _edit_column(proc_net_copy / "route", 0, 6, "99", header=True)  # Metric
    _edit_column(proc_net_copy / "ipv6_route", 0, 5, "00000099", header=False)  # metric
    metric = compare(before, take_snapshot(s))
    assert metric.outcome("routes_ipv4") == "changed"
    assert metric.outcome("routes_ipv6") == "changed"


def test_malformed_table_is_unread(proc_net_copy: Path, sources: Sources) -> None:
    (proc_net_copy / "route").write_text("not a route table\n")
    (proc_net_copy / "tcp6").write_text("garbage\n")
    snap = take_snapshot(dataclasses.replace(sources, proc_net=proc_net_copy))
    assert snap.facet("routes_ipv4").reason == "parse_failed"
    assert snap.facet("listening_sockets").reason == "parse_failed"


def test_decode_address() -> None:
    assert decode_address("0100007F") == "127.0.0.1"
    assert decode_address("00000000000000000000000001000000") == "::1"
    with pytest.raises(ValueError, match="address"):
        decode_address("0100")


def test_snapshot_and_comparison_invariants(sources: Sources) -> None:
    snap = take_snapshot(sources)
    with pytest.raises(ValueError, match="every facet"):
        HostSnapshot(tuple(reversed(snap.facets)))
    with pytest.raises(ValueError, match="digest"):
        FacetSnapshot("resolver", "present", None, 0)
    with pytest.raises(ValueError, match="reason"):
        FacetSnapshot("resolver", "unread", None, 0)
    with pytest.raises(ValueError, match="hex"):
        FacetSnapshot("resolver", "present", "A" * 64, 0)
    present = FacetSnapshot("resolver", "present", "a" * 64, 1)
    absent = FacetSnapshot("resolver", "absent", None, 0)
    assert compare_facet(present, absent).outcome == "changed"
    assert compare_facet(absent, absent).outcome == "unchanged"
