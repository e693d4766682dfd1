"""The rlimits the child sets before exec (`_set_limits`), soft and hard, read back.

Why both: the soft limit is the budget; the hard limit is what the command could raise
its soft limit back to, so it must be the budget too (CPU: one second more, so the
kernel's SIGXCPU at the soft limit comes before its SIGKILL and the end is nameable).
An inherited hard limit below the budget wins: setrlimit cannot raise it unprivileged,
and the command gets that smaller limit for both.

Each case runs in a forked child (limits once lowered stay lowered in a process).
"""

from __future__ import annotations

import json
import os
import resource

from guest.tools.confine import RunLimits, _set_limits

INF = resource.RLIM_INFINITY
GIB = 1024**3
NAMES = {
    "cpu": resource.RLIMIT_CPU,
    "as": resource.RLIMIT_AS,
    "fsize": resource.RLIMIT_FSIZE,
    "nproc": resource.RLIMIT_NPROC,
}
LIMITS = RunLimits(cpu_seconds=7, address_space_bytes=GIB, file_size_bytes=1 << 22, nproc=99)


def limits_set_under(hard: dict[str, int], limits: RunLimits = LIMITS) -> dict[str, list[int]]:
    """(soft, hard) of each resource after `_set_limits(limits)` in a child whose
    inherited limits were first made (hard, hard) for the resources named in `hard`."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1  # until the report is written
        try:
            os.close(r)
            try:
                for name, value in hard.items():
                    resource.setrlimit(NAMES[name], (value, value))
            except (OSError, ValueError):
                os.write(w, b'"cannot set the inherited limits here"')
            else:
                _set_limits(limits)
                now = {name: resource.getrlimit(which) for name, which in NAMES.items()}
                os.write(w, json.dumps(now).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    got = json.loads(data)
    # The tests run as root (the harness's machines; CI): raising a hard limit works.
    assert isinstance(got, dict), got
    return got


def test_under_unlimited_hard_limits_soft_and_hard_are_the_budget() -> None:
    """Unlimited is RLIM_INFINITY (-1 to Python): it must never be taken as a number."""
    unlimited = ("cpu", "as", "fsize")
    # Root's hard limits are unlimited on the harness's machines (CI included): if this
    # fails, the machine is not one the harness supports, and the test says so.
    assert all(resource.getrlimit(NAMES[name])[1] == INF for name in unlimited)
    got = limits_set_under({})
    assert {name: got[name] for name in unlimited} == {
        "cpu": [7, 8],  # SIGXCPU at 7 s, SIGKILL at 8 s
        "as": [GIB, GIB],
        "fsize": [1 << 22, 1 << 22],
    }


def test_a_larger_inherited_hard_limit_is_lowered_to_the_budget() -> None:
    got = limits_set_under({"cpu": 100, "as": 2 * GIB, "fsize": 1 << 23, "nproc": 1000})
    assert got == {"cpu": [7, 8], "as": [GIB, GIB], "fsize": [1 << 22] * 2, "nproc": [99, 99]}


def test_a_smaller_inherited_hard_limit_wins_for_both() -> None:
    got = limits_set_under({"cpu": 5, "as": GIB // 2, "fsize": 1 << 20, "nproc": 50})
    assert got == {
        "cpu": [5, 5],
        "as": [GIB // 2, GIB // 2],
        "fsize": [1 << 20, 1 << 20],
        "nproc": [50, 50],
    }


def test_the_cpu_seconds_grace_never_exceeds_an_inherited_hard_limit() -> None:
    assert limits_set_under({"cpu": 7})["cpu"] == [7, 7]
    assert limits_set_under({"cpu": 8})["cpu"] == [7, 8]
