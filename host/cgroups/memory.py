"""Memory readings shared by both versions: three-valued reads and derived figures.

Each figure is read on its own so one broken file makes that figure `unread` and
leaves the others intact. Derived figures (working set, headroom) are `unread` when
any input is unread, never computed from a guess.
"""

from collections.abc import Callable
from pathlib import Path

from host.cgroups.errors import CgroupError
from host.cgroups.fileio import parse_int, parse_keyed, read_text
from host.cgroups.readings import Reading
from receipts.kernelfacts import CGROUP_UNLIMITED


def guarded(read: Callable[[], Reading]) -> Reading:
    """Run a reading; a `CgroupError` becomes `unread` with its category."""
    try:
        return read()
    except CgroupError as err:
        return Reading.unread(err.category)


def read_int(path: Path) -> Reading:
    """An interface file holding one integer."""
    return guarded(
        lambda: Reading.present(parse_int(read_text(path, controller="memory"), name=path.name))
    )


def read_limit(path: Path) -> Reading:
    """A limit file: `max` (v2) or a value at the v1 ceiling is `absent` (no limit)."""

    def read() -> Reading:
        text = read_text(path, controller="memory").strip()
        if text == "max":
            return Reading.absent()
        value = parse_int(text, controller="memory", name=path.name)
        return Reading.absent() if value >= CGROUP_UNLIMITED else Reading.present(value)

    return guarded(read)


def read_key(path: Path, key: str) -> Reading:
    """One `key value` line of a keyed file; a missing key is `counter_missing`."""

    def read() -> Reading:
        values = parse_keyed(read_text(path, controller="memory"), name=path.name)
        if key not in values:
            return Reading.unread("counter_missing")
        return Reading.present(values[key])

    return guarded(read)


def working_set(usage: Reading, inactive_file: Reading) -> Reading:
    """usage - inactive_file, floored at 0 (v1 usage is batched per CPU and can lag)."""
    if usage.state != "present" or inactive_file.state != "present":
        return Reading.unread(usage.reason or inactive_file.reason or "counter_missing")
    assert usage.value is not None
    assert inactive_file.value is not None
    return Reading.present(max(0, usage.value - inactive_file.value))


def headroom(limit: Reading, working: Reading) -> Reading:
    """limit - working set; `absent` when no limit is set, `unread` if either is unread."""
    if limit.state == "unread" or working.state != "present":
        return Reading.unread(limit.reason or working.reason or "counter_missing")
    if limit.state == "absent":
        return Reading.absent()
    assert limit.value is not None
    assert working.value is not None
    return Reading.present(limit.value - working.value)
