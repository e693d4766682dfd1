"""run_tests: deadline kills the whole group, rlimits apply, the network is gone."""

from __future__ import annotations

import errno
import os
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from guest.tools import confine
from guest.tools.confine import RunLimits
from guest.tools.registry import ToolSet
from guest.tools.result import ToolResult
from tests.guest.tools.support import call

PY = sys.executable


def run(ws: Path, argv: Sequence[str], **kwargs: Any) -> ToolResult:
    with ToolSet(ws, argv, [], "approve_all", **kwargs) as ts:
        return call(ts, "run_tests")


def details(result: ToolResult) -> dict[str, Any]:
    dumped = result.model_dump()["details"]
    assert isinstance(dumped, dict)
    return dumped


def process_gone(pid: int, within_s: float = 3.0) -> bool:
    """True once `pid` is absent or a zombie (PID 1 here reaps orphans late)."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def connect_command(port: int) -> list[str]:
    code = (
        "import socket, sys\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n"
        "except OSError:\n"
        "    sys.exit(3)\n"
        "print('connected')\n"
    )
    return [PY, "-c", code]


def test_passing_command(ws: Path) -> None:
    result = run(ws, [PY, "-c", "print('all good')"])
    assert result.outcome == "ok"
    assert "status: passed (exit status 0)" in result.output
    assert "all good" in result.output
    assert details(result)["exit"] == "passed"
    assert not result.truncated


def test_failing_command(ws: Path) -> None:
    result = run(ws, [PY, "-c", "import sys; print('boom'); sys.exit(2)"])
    assert details(result)["exit"] == "failed"
    assert details(result)["returncode"] == 2


def test_runs_in_the_workspace(ws: Path) -> None:
    (ws / "marker.txt").write_text("here\n")
    result = run(ws, [PY, "-c", "print(open('marker.txt').read())"])
    assert "here" in result.output


def test_deadline_kills_the_sleeping_process_group(ws: Path) -> None:
    argv = ["/bin/sh", "-c", "sleep 30 & echo $! > bg.pid; sleep 30"]
    start = time.monotonic()
    result = run(ws, argv, run_limits=RunLimits(wall_seconds=0.5))
    assert time.monotonic() - start < 5
    assert details(result)["exit"] == "deadline"
    assert process_gone(int((ws / "bg.pid").read_text()))


def test_background_process_killed_after_normal_exit(ws: Path) -> None:
    argv = ["/bin/sh", "-c", "sleep 30 & echo $! > bg.pid; exit 0"]
    result = run(ws, argv)
    assert details(result)["exit"] == "passed"
    assert process_gone(int((ws / "bg.pid").read_text()))


def test_network_unreachable_with_syscall_isolation(ws: Path, listener: int) -> None:
    result = run(ws, connect_command(listener), net_mechanism="unshare_syscall")
    assert details(result)["net_isolation"] == "applied"
    assert details(result)["net_mechanism"] == "unshare_syscall"
    assert details(result)["returncode"] == 3
    assert "connected" not in result.output


def test_network_unreachable_with_unshare_binary(ws: Path, listener: int) -> None:
    result = run(ws, connect_command(listener), net_mechanism="unshare_binary")
    assert details(result)["net_isolation"] == "applied"
    assert details(result)["net_mechanism"] == "unshare_binary"
    assert details(result)["returncode"] == 3


def test_listener_reachable_without_isolation(ws: Path, listener: int) -> None:
    """Control: the probe can see the listener, so its failure above means isolation."""
    result = run(ws, connect_command(listener), net_policy="disabled")
    assert details(result)["net_isolation"] == "not_applied"
    assert details(result)["exit"] == "passed"
    assert "connected" in result.output


def failing_unshare(_flags: int) -> int:
    import ctypes

    ctypes.set_errno(errno.EPERM)
    return -1


def test_unavailable_isolation_is_reported_not_pretended(
    ws: Path, listener: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "_LIBC_UNSHARE", failing_unshare)
    result = run(ws, connect_command(listener), net_mechanism="unshare_syscall")
    assert details(result)["net_isolation"] == "not_applied"
    assert "network isolation: not_applied" in result.output


def test_isolation_judged_by_read_back_not_by_return_code(
    ws: Path, listener: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unshare that claims success but changes nothing is caught by the read-back."""
    monkeypatch.setattr(confine, "_LIBC_UNSHARE", lambda _flags: 0)
    result = run(ws, connect_command(listener), net_mechanism="unshare_syscall")
    assert details(result)["net_isolation"] == "not_applied"
    assert details(result)["exit"] == "passed"  # and indeed the listener was reachable


def test_required_isolation_refuses_to_run_without_it(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "_LIBC_UNSHARE", failing_unshare)
    argv = ["/bin/sh", "-c", "touch ran.txt"]
    result = run(ws, argv, net_mechanism="unshare_syscall", net_policy="required")
    assert result.outcome == "net_isolation_unavailable"
    assert not (ws / "ran.txt").exists()


def test_rlimits_applied_in_the_child(ws: Path) -> None:
    limits = RunLimits(
        cpu_seconds=7, address_space_bytes=1 << 30, file_size_bytes=1 << 22, nproc=99
    )
    code = (
        "import resource as r\n"
        "for n in ('RLIMIT_CPU', 'RLIMIT_AS', 'RLIMIT_FSIZE', 'RLIMIT_NPROC'):\n"
        "    print(n, r.getrlimit(getattr(r, n))[0])\n"
    )
    result = run(ws, [PY, "-c", code], run_limits=limits)
    assert "RLIMIT_CPU 7\n" in result.output
    assert f"RLIMIT_AS {1 << 30}\n" in result.output
    assert f"RLIMIT_FSIZE {1 << 22}\n" in result.output
    assert "RLIMIT_NPROC 99\n" in result.output


def test_file_size_limit_category(ws: Path) -> None:
    argv = ["/bin/sh", "-c", "exec head -c 3000000 /dev/zero > big.bin"]
    result = run(ws, argv, run_limits=RunLimits(file_size_bytes=1 << 20))
    assert details(result)["exit"] == "file_size_limit"
    assert (ws / "big.bin").stat().st_size == 1 << 20


def test_cpu_limit_category(ws: Path) -> None:
    result = run(ws, [PY, "-c", "while True: pass"], run_limits=RunLimits(cpu_seconds=1))
    assert details(result)["exit"] == "cpu_limit"


def test_cpu_limit_kill_counts_system_time(ws: Path) -> None:
    """A command that ignores SIGXCPU is killed at the hard limit (budget + 1 s) and is
    still a CPU-limit end, though its time was spent in the kernel (reading /dev/zero):
    the CPU used is user plus system time, as the kernel's limit counts it. Takes 2 s."""
    code = (
        "import os, signal\n"
        "signal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
        "fd = os.open('/dev/zero', os.O_RDONLY)\n"
        "while True:\n"
        "    os.read(fd, 1 << 20)\n"
    )
    result = run(ws, [PY, "-c", code], run_limits=RunLimits(cpu_seconds=1, wall_seconds=30))
    assert details(result)["returncode"] == -9
    assert details(result)["exit"] == "cpu_limit"


def test_output_tail_bounded_and_counted(ws: Path) -> None:
    code = "for i in range(5000): print(f'line {i:05d}')"
    result = run(ws, [PY, "-c", code], run_limits=RunLimits(tail_lines=10))
    total = sum(len(f"line {i:05d}\n") for i in range(5000))
    assert details(result)["output_bytes"] == total
    assert "line 04999" in result.output
    assert "line 04990" in result.output
    assert "line 04989" not in result.output
    assert result.truncated
    assert result.bytes_before_truncation - result.bytes_out == total - len(
        "\n".join(f"line {i:05d}" for i in range(4990, 5000))
    )


def test_final_bound_applies_to_large_tails(ws: Path) -> None:
    code = "for i in range(2000): print('x' * 199)"
    limits = RunLimits(tail_lines=1000, tail_bytes=1024 * 1024)
    result = run(ws, [PY, "-c", code], run_limits=limits)
    assert result.bytes_out <= 64 * 1024
    assert result.output.endswith("(Output truncated.)")
    assert result.truncated
    assert result.bytes_before_truncation > 200_000


def test_spawn_failure(ws: Path) -> None:
    result = run(ws, ["/nonexistent/test-runner"], net_mechanism="unshare_syscall")
    assert result.outcome == "spawn_failed"


def test_command_never_comes_from_the_model(ws: Path) -> None:
    with ToolSet(ws, [PY, "-c", "pass"], [], "approve_all") as ts:
        result = ts.dispatch("run_tests", '{"command": "rm -rf /"}')
    assert result.outcome == "invalid_arguments"


def test_own_namespace_read_back() -> None:
    assert confine.own_net_namespace() is not None
    assert os.path.exists("/proc/self/ns/net")
