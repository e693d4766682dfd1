"""How a member's end becomes its entry in suite.json (harness/suite/run.py)."""

from __future__ import annotations

from pathlib import Path

from harness.profiles import load_profile
from harness.suite.executor import MemberEnd
from harness.suite.run import member_argv, suite_member
from harness.suite.spec import Member
from tests.receipts.test_suite_receipt import receipt

TASKS = Path(__file__).parents[3] / "profiles" / "tasks"


def member(script: str | None = "oracle") -> Member:
    return Member(
        member_id="0007",
        task="polyglot-py-bowling",
        language="python",
        profile=load_profile("tiny"),
        agent="model" if script is None else f"scripted:{script}",
        script=None
        if script is None
        else TASKS / "polyglot-py-bowling" / "scripts" / f"{script}.json",
        repeat=0,
    )


def test_a_member_with_a_valid_receipt(tmp_path: Path) -> None:
    path = tmp_path / "trial.zip"
    path.write_bytes(receipt("a" * 32, "accepted"))
    entry, data = suite_member(member(), MemberEnd("0007", "finished", 0, path))
    assert data == path.read_bytes()
    assert (entry.verdict, entry.trial_id, entry.missing, entry.script) == (
        "accepted",
        "a" * 32,
        None,
        "oracle",
    )


def test_members_without_a_receipt_say_why(tmp_path: Path) -> None:
    cases = [
        (MemberEnd("0007", "cancelled", None, None), "cancelled_before_start"),
        (MemberEnd("0007", "cancelled", 143, None), "cancelled_without_receipt"),
        # Signal-killed after it started (Slurm's `0:15`): no exit status, but it ran.
        (MemberEnd("0007", "cancelled", None, None, started=True), "cancelled_without_receipt"),
        (MemberEnd("0007", "cancelled", None, None, started=False), "cancelled_before_start"),
        (MemberEnd("0007", "lost", None, None), "job_lost"),
        (MemberEnd("0007", "failed_to_start", None, None), "failed_to_start"),
        (MemberEnd("0007", "finished", 1, None), "no_receipt"),
        (MemberEnd("0007", "finished", 0, tmp_path / "absent.zip"), "no_receipt"),
    ]
    for end, reason in cases:
        entry, data = suite_member(member(), end)
        assert (entry.missing, entry.verdict, data) == (reason, None, None), reason


def test_a_receipt_that_does_not_audit_is_kept_out_and_named(tmp_path: Path) -> None:
    path = tmp_path / "trial.zip"
    data = bytearray(receipt("a" * 32, "task_incomplete"))
    data[data.index(b"trial.json") + 150] ^= 1
    path.write_bytes(bytes(data))
    entry, blob = suite_member(member("null"), MemberEnd("0007", "finished", 1, path))
    assert (entry.missing, blob) == ("receipt_invalid", None)


def test_the_member_command_line(tmp_path: Path) -> None:
    argv = member_argv(member(None), tmp_path, "qemu", "auto")
    assert argv[1:4] == ("-m", "harness.cli", "trial")
    assert argv[argv.index("--agent") + 1] == "model"
    assert argv[argv.index("--out") + 1] == str(tmp_path) and argv[-1] == "--json"
    scripted = member_argv(member("null"), tmp_path, "qemu", "tcg")
    assert scripted[scripted.index("--agent") + 1].endswith("polyglot-py-bowling/scripts/null.json")
