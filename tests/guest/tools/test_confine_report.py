"""run_confined's report: its duration in milliseconds, the report of a command that
never ran, the keyword-only call, and where the network-namespace pieces come from.

Why: `duration_ms` and the byte counts go into the tool-call receipt and are shown to
the model; a report for a command that never started must say that nothing ran and
nothing was output, not carry numbers from nowhere.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, Literal

import pytest

from guest.tools import confine
from guest.tools.categories import NetPolicy
from guest.tools.confine import (
    RunLimits,
    RunReport,
    _load_libc_unshare,
    available_mechanism,
    own_net_namespace,
    run_confined,
)

TRUE = shutil.which("true") or "/bin/true"
FAILING_UNSHARE = "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"


class _OneSecondPerRead:
    """A clock that moves exactly one second each time it is read (and sleeps for real),
    so any elapsed time it yields is a whole number of seconds."""

    def __init__(self) -> None:
        self.now = 10_000.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(seconds)


def _failing_unshare(flags: int) -> int:
    """libc's unshare as it fails without the privilege: -1."""
    del flags
    return -1


def test_duration_is_the_elapsed_time_in_milliseconds(tmp_path: Path) -> None:
    report = run_confined(
        [sys.executable, "-c", "import time; time.sleep(0.3)"],
        cwd=str(tmp_path),
        env={},
        limits=RunLimits(wall_seconds=30),
        net_policy="disabled",
    )
    assert report.exit == "passed"
    assert 300 <= report.duration_ms < 10_000


def test_duration_converts_whole_seconds_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "time", _OneSecondPerRead())
    report = run_confined(
        [TRUE], cwd=str(tmp_path), env={}, limits=RunLimits(), net_policy="disabled"
    )
    assert report.exit == "passed"
    assert 1000 <= report.duration_ms < 600_000
    assert report.duration_ms % 1000 == 0


def test_a_command_that_never_ran_reports_nothing_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Required isolation whose unshare fails in the child: nothing ran, nothing was
    output or omitted, and the time spent (two clock reads: one second) is reported."""
    monkeypatch.setattr(confine, "_LIBC_UNSHARE", _failing_unshare)
    monkeypatch.setattr(confine, "time", _OneSecondPerRead())
    report = run_confined(
        [TRUE],
        cwd=str(tmp_path),
        env={},
        limits=RunLimits(),
        net_policy="required",
        mechanism="unshare_syscall",
    )
    assert report.exit is None
    assert report.returncode is None
    assert report.net_isolation == "not_applied"
    assert report.net_mechanism == "unshare_syscall"
    assert (report.tail, report.output_bytes, report.omitted_bytes) == ("", 0, 0)
    assert report.duration_ms == 1000


def test_everything_but_the_command_is_passed_by_name(tmp_path: Path) -> None:
    """cwd, env, limits and the policy are keyword-only: a positional call (where two
    of them could be swapped unseen) is refused before anything runs."""
    positional: Any = run_confined
    with pytest.raises(TypeError):
        positional([TRUE], str(tmp_path), {}, RunLimits(), "disabled")


def test_the_unshare_binary_is_found_on_our_path_not_the_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's PATH has no `unshare` (only the `readlink` the wrapper needs):
    the binary we resolved is run by its full path, and isolation is applied."""
    assert shutil.which("unshare") is not None  # util-linux, on every Debian
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    readlink = shutil.which("readlink")
    assert readlink is not None
    (bin_dir / "readlink").symlink_to(readlink)
    report = run_confined(
        [TRUE],
        cwd=str(tmp_path),
        env={"PATH": str(bin_dir)},
        limits=RunLimits(wall_seconds=30),
        net_policy="required",
        mechanism="unshare_binary",
    )
    assert report.exit == "passed"
    assert report.net_mechanism == "unshare_binary"
    assert report.net_isolation == "applied"


def _path_with(tmp_path: Path, names: tuple[str, ...]) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in names:
        exe = bin_dir / name
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    return str(bin_dir)


def test_without_the_syscall_the_binary_is_used_when_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "_LIBC_UNSHARE", None)
    monkeypatch.setenv("PATH", _path_with(tmp_path, ("unshare",)))
    assert available_mechanism() == "unshare_binary"


def test_without_the_syscall_or_the_binary_there_is_no_mechanism(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "_LIBC_UNSHARE", None)
    monkeypatch.setenv("PATH", _path_with(tmp_path, ()))
    assert available_mechanism() == "none"


def test_an_unreadable_namespace_link_is_none_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without /proc our namespace cannot be read: None (judged `unread`), no crash."""
    monkeypatch.setattr(confine, "_NS_LINK", str(tmp_path / "no-proc" / "net"))
    assert own_net_namespace() is None


def test_the_callers_inheritable_descriptors_are_not_passed_on(tmp_path: Path) -> None:
    """An inheritable descriptor of ours (a socket or file a caller marked inheritable)
    is closed before the command runs: the command sees only its stdin, stdout, stderr."""
    r, w = os.pipe()
    try:
        os.set_inheritable(w, True)
        report = run_confined(
            ["/bin/sh", "-c", f"test -e /proc/self/fd/{w} && echo leaked; echo checked"],
            cwd=str(tmp_path),
            env={},
            limits=RunLimits(wall_seconds=30),
            net_policy="disabled",
        )
    finally:
        os.close(r)
        os.close(w)
    assert report.exit == "passed"
    assert report.tail == "checked\n"


def test_the_report_cannot_be_changed_once_made(tmp_path: Path) -> None:
    report = run_confined(
        [TRUE], cwd=str(tmp_path), env={}, limits=RunLimits(), net_policy="disabled"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.exit = "failed"  # type: ignore[misc]


def test_the_end_of_a_quick_command_is_noticed_at_once(tmp_path: Path) -> None:
    """The leader's exit is polled every 10 ms, not every second."""
    report = run_confined(
        ["sleep", "0.05"],
        cwd=str(tmp_path),
        env={"PATH": "/usr/bin:/bin"},
        limits=RunLimits(),
        net_policy="disabled",
    )
    assert report.exit == "passed"
    assert 50 <= report.duration_ms < 1000  # a 1 s poll would take at least 1,010 ms


def test_an_escaped_process_holding_the_output_costs_one_second_at_most(
    tmp_path: Path,
) -> None:
    """Without a sandbox, a process that left the group (setsid) survives the group kill
    and keeps the output pipe open: the drain gives it the 1 s grace and then stops
    promptly (within the drain's 50 ms poll), instead of waiting for the process to end."""
    report = run_confined(
        ["/bin/sh", "-c", "setsid sleep 5 & echo $!; sleep 0.2"],
        cwd=str(tmp_path),
        env={"PATH": "/usr/bin:/bin"},
        limits=RunLimits(),
        net_policy="disabled",
    )
    escaped = int(report.tail)
    try:
        assert report.exit == "passed"
        # leader 0.2 s, grace 1 s; a 1 s drain poll would end near 2.1 s
        assert 1200 <= report.duration_ms < 1900
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, signal.SIGKILL)


def test_a_command_past_its_deadline_reports_the_kill(tmp_path: Path) -> None:
    report = run_confined(
        ["sleep", "30"],
        cwd=str(tmp_path),
        env={"PATH": "/usr/bin:/bin"},
        limits=RunLimits(wall_seconds=0.2),
        net_policy="disabled",
    )
    assert report.exit == "deadline"
    assert report.returncode == -signal.SIGKILL


def test_the_loaded_unshare_reports_its_errno() -> None:
    """The child raises OSError(errno) from a failed unshare: libc's errno must reach us."""
    unshare = _load_libc_unshare()
    assert unshare is not None
    ctypes.set_errno(0)
    assert unshare(1) == -1  # 1 is no CLONE_* flag: refused before anything is done
    assert ctypes.get_errno() == errno.EINVAL


def test_no_loadable_c_library_gives_no_syscall(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no C library can be loaded (a real OSError from dlopen): None, not a crash
    at import, and `auto` then looks for the binary."""
    real = ctypes.CDLL

    def cdll(name: str | None, use_errno: bool = False) -> ctypes.CDLL:
        del name
        return real("/nonexistent/libc.so.6", use_errno=use_errno)

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    assert _load_libc_unshare() is None


@pytest.fixture
def failing_unshare_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `unshare` on our PATH that fails as it does without the privilege."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "unshare"
    exe.write_text(
        "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    work = tmp_path / "work"
    work.mkdir()
    return work


def _echo_with_the_binary(work: Path, policy: NetPolicy) -> RunReport:
    """`echo ran > ran.txt` in `work`, isolated by the `unshare` binary on our PATH."""
    return run_confined(
        ["/bin/sh", "-c", "echo ran > ran.txt"],
        cwd=str(work),
        env={},
        limits=RunLimits(wall_seconds=30),
        net_policy=policy,
        mechanism="unshare_binary",
    )


def test_a_failed_unshare_binary_runs_nothing_when_isolation_is_required(
    failing_unshare_binary: Path,
) -> None:
    report = _echo_with_the_binary(failing_unshare_binary, "required")
    assert report.exit is None
    assert report.net_isolation == "not_applied"
    assert not (failing_unshare_binary / "ran.txt").exists()


def test_a_failed_unshare_binary_runs_the_command_unisolated_at_best_effort(
    failing_unshare_binary: Path,
) -> None:
    report = _echo_with_the_binary(failing_unshare_binary, "best_effort")
    assert report.exit == "passed"
    assert (report.net_mechanism, report.net_isolation) == ("none", "not_applied")
    assert (failing_unshare_binary / "ran.txt").read_text() == "ran\n"


@pytest.mark.parametrize("policy", ["required", "best_effort"])
def test_run_as_refuses_the_unshare_binary_before_running(tmp_path: Path, policy: str) -> None:
    """The binary would have to run as root after the drop: refused, nothing runs."""
    with pytest.raises(ValueError, match="syscall"):
        run_confined(
            ["/bin/sh", "-c", "echo ran > ran.txt"],
            cwd=str(tmp_path),
            env={},
            limits=RunLimits(),
            net_policy=policy,  # type: ignore[arg-type]
            mechanism="unshare_binary",
            run_as=(65534, 65534),
        )
    assert not (tmp_path / "ran.txt").exists()


def _true_isolated_by(
    work: Path, mechanism: Literal["unshare_syscall", "unshare_binary"]
) -> RunReport:
    """`true` in `work` with network isolation required, by the named mechanism."""
    return run_confined(
        [TRUE],
        cwd=str(work),
        env={},
        limits=RunLimits(wall_seconds=30),
        net_policy="required",
        mechanism=mechanism,
    )


def test_the_unshare_binary_is_chosen_by_name_even_with_the_syscall_available(
    tmp_path: Path,
) -> None:
    """`mechanism` names one: it is used as named, not replaced by what `auto` picks."""
    assert shutil.which("unshare") is not None  # util-linux, on every Debian
    report = _true_isolated_by(tmp_path, "unshare_binary")
    assert report.net_mechanism == "unshare_binary"


def test_disabled_network_policy_uses_no_mechanism(tmp_path: Path) -> None:
    report = run_confined(
        [TRUE],
        cwd=str(tmp_path),
        env={},
        limits=RunLimits(),
        net_policy="disabled",
        mechanism="unshare_syscall",
    )
    assert (report.net_mechanism, report.net_isolation) == ("none", "not_applied")


def test_an_unreadable_namespace_in_the_child_runs_the_command_as_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unshare worked but neither side can read a namespace link (no /proc): the
    command runs, and isolation is `unread`, neither claimed nor refused."""
    monkeypatch.setattr(confine, "_NS_LINK", str(tmp_path / "no-proc" / "net"))
    report = _true_isolated_by(tmp_path, "unshare_syscall")
    assert report.exit == "passed"
    assert (report.net_mechanism, report.net_isolation) == ("unshare_syscall", "unread")
