"""Honest values cross: a correct solution that returns a standard-library container or
number, or an object of a helper class of its own, passes the split judge as it passes in
process (guest/verify/wire.py lists the types). Through the real verifier, as root.

Mutation controls (each run, each failed): a type's line removed from wire.py's encoder
(`range`, `Decimal`, the dict views) -> its test here fails split and still passes in
process; the helper class refused in proxies.SolutionHandles (an `instance` of an
undeclared class as a ProtocolError, as before) -> test_helper_object and every later
test of the file fail split.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from guest.task import load_task, task_digest
from guest.verify.run import verify
from tests.guest.support_tasks import scratch

__all__ = ["scratch"]

SOLUTION = """
import collections, datetime, decimal, fractions, io


def a_range():
    return range(1, 7, 2)


def a_complex():
    return complex(1.5, -2)


def a_bytearray():
    return bytearray(b"ab")


def a_decimal():
    return decimal.Decimal("1.10")


def a_fraction():
    return fractions.Fraction(2, 6)


def a_deque():
    return collections.deque([1, 2, 3], maxlen=5)


def an_ordered_dict():
    return collections.OrderedDict([("b", 1), ("a", 2)])


def a_counter():
    return collections.Counter("abracadabra")


def a_defaultdict():
    groups = collections.defaultdict(list)
    groups["x"].append(1)
    return groups


def dict_views():
    data = {"a": 1, "b": 2}
    return data.keys(), data.values(), data.items()


def dates():
    utc = datetime.timezone(datetime.timedelta(hours=1))
    return (
        datetime.date(2026, 12, 5),
        datetime.datetime(2026, 12, 5, 8, 30, tzinfo=utc),
        datetime.time(8, 30, 1),
        datetime.timedelta(days=1, seconds=5, microseconds=7),
    )


def a_stringio():
    buffer = io.StringIO("one\\ntwo\\n")
    buffer.readline()
    return buffer


class Point:
    def __init__(self, x):
        self.x = x

    def moved(self, dx):
        return Point(self.x + dx)

    def __len__(self):
        return 0


def a_helper():
    return Point(3)


def total(values):
    return sum(values)


def echo(value):
    return value
"""

TESTS = """
import collections, datetime, decimal, fractions, io

from values import (a_bytearray, a_complex, a_counter, a_decimal, a_defaultdict,
    a_deque, a_fraction, a_helper, a_range, a_stringio, an_ordered_dict, dates, dict_views,
    echo, echo_none, total)


def test_range():
    assert a_range() == range(1, 7, 2) and type(a_range()) is range
    assert list(a_range()) == [1, 3, 5] and 3 in a_range() and len(a_range()) == 3


def test_numbers():
    assert a_complex() == complex(1.5, -2) and type(a_complex()) is complex
    assert a_decimal() == decimal.Decimal("1.10") and str(a_decimal()) == "1.10"
    assert a_fraction() == fractions.Fraction(1, 3) and type(a_fraction()) is fractions.Fraction


def test_bytes():
    assert a_bytearray() == bytearray(b"ab") and type(a_bytearray()) is bytearray


def test_collections():
    assert a_deque() == collections.deque([1, 2, 3]) and a_deque().maxlen == 5
    assert list(an_ordered_dict()) == ["b", "a"]
    assert an_ordered_dict() == collections.OrderedDict([("b", 1), ("a", 2)])
    assert a_counter().most_common(1) == [("a", 5)]
    assert a_defaultdict() == {"x": [1]} and type(a_defaultdict()) is collections.defaultdict


def test_dict_views():
    keys, values, items = dict_views()
    assert keys == {"a", "b"} and sorted(values) == [1, 2] and ("a", 1) in items
    assert items == {("a", 1), ("b", 2)}


def test_dates():
    day, moment, clock, span = dates()
    assert day == datetime.date(2026, 12, 5)
    assert moment.utcoffset() == datetime.timedelta(hours=1) and moment.hour == 8
    assert clock == datetime.time(8, 30, 1)
    assert span == datetime.timedelta(days=1, seconds=5, microseconds=7)


def test_stringio():
    buffer = a_stringio()
    assert buffer.read() == "two\\n" and buffer.getvalue() == "one\\ntwo\\n"


def test_helper_object():
    point = a_helper()
    assert point.x == 3 and point.moved(2).x == 5
    assert point == point and point != a_helper()
    assert not point  # its length is 0: truth from a number it computed


def test_values_from_the_tests():
    assert total(range(5)) == 10
    assert echo(decimal.Decimal("2.5")) == decimal.Decimal("2.5")
    assert echo(collections.Counter("aa")) == collections.Counter({"a": 2})
    assert echo_none() is None
"""

TEST_NAMES = (
    "test_range",
    "test_numbers",
    "test_bytes",
    "test_collections",
    "test_dict_views",
    "test_dates",
    "test_stringio",
    "test_helper_object",
    "test_values_from_the_tests",
)


def _task(root: Path, judge: str) -> Path:
    task_dir = root / f"honest-values-{judge.replace('_', '-')}"
    (task_dir / "workspace").mkdir(parents=True)
    (task_dir / "hidden_tests").mkdir()
    (task_dir / "workspace" / "values.py").write_text("def echo(value):\n    pass\n")
    (task_dir / "hidden_tests" / "test_values.py").write_text(TESTS)
    (task_dir / "hidden_tests" / "pytest.ini").write_text("[pytest]\npythonpath = ..\n")
    expected = ", ".join(f'"hidden_tests.test_values::{name}"' for name in TEST_NAMES)
    (task_dir / "task.toml").write_text(
        f'id = "{task_dir.name}"\nlanguage = "python"\nprompt = "values"\nfixtures = []\n\n'
        '[tests]\ncommand = ["python3", "-I", "-m", "pytest", "-q"]\ndeadline_s = 60\n\n'
        '[hidden]\ncommand = ["python3", "-I", "-m", "pytest", "-q", "-p", "no:cacheprovider", '
        '"--noconftest", "-c", "hidden_tests/pytest.ini", "--rootdir", ".", "--junitxml", '
        f'"{{report}}", "hidden_tests"]\nreport = "junit"\njudge = "{judge}"\n'
        f"expected = [{expected}]\ndeadline_s = 120\n"
    )
    task_dir.chmod(0o700)
    return task_dir


@pytest.mark.parametrize("judge", ["split", "in_process"])
def test_a_correct_solution_returning_common_values_passes(judge: str, scratch: Path) -> None:
    task_dir = _task(scratch / "tasks", judge)
    workspace = scratch / "final"
    shutil.copytree(task_dir / "workspace", workspace)
    (workspace / "values.py").write_text(SOLUTION + "\n\ndef echo_none():\n    return None\n")
    task = load_task(task_dir)
    record = verify(task, task_dir, task_digest(task_dir), workspace, scratch / "verify")
    assert record.judge == judge
    assert (record.result, record.tests_passed) == ("passed", len(TEST_NAMES)), record
