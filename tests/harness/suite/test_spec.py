"""Suite files: what they expand to, and the mistakes that must stop a suite early."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.suite.spec import SuiteError, load_suite

REPO = Path(__file__).parents[3]
TASKS = REPO / "profiles" / "tasks"


def suite_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(body)
    return path


def test_the_controls_suite_covers_every_imported_exercise_three_times() -> None:
    suite = load_suite(REPO / "profiles" / "suites" / "polyglot-python-controls.toml", TASKS)
    tasks = sorted(p.name for p in TASKS.glob("polyglot-py-*"))
    assert len(suite.members) == 3 * len(tasks) == 99
    assert [m.member_id for m in suite.members] == [f"{n:04d}" for n in range(99)]
    first, second, third = suite.members[:3]
    assert (first.task, first.agent, second.agent, third.agent) == (
        tasks[0],
        "scripted:oracle",
        "scripted:null",
        "scripted:runner_patch",
    )
    assert first.script == TASKS / tasks[0] / "scripts" / "oracle.json"
    assert all(m.language == "python" and m.profile.name == "tiny" for m in suite.members)


def test_members_are_tasks_x_profiles_x_agents_x_repeats(tmp_path: Path) -> None:
    body = (
        'name = "x"\ntasks = ["py-one-line-fix", "polyglot-py-bowl*"]\n'
        'profiles = ["tiny", "smollm2"]\nagents = ["model"]\nrepeats = 3\n'
    )
    suite = load_suite(suite_file(tmp_path, body), TASKS)
    assert len(suite.members) == 2 * 2 * 3
    assert [m.repeat for m in suite.members[:3]] == [0, 1, 2]
    assert suite.members[0].script is None


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            'name = "x"\ntasks = ["polyglot-py-nope*"]\nprofiles = ["tiny"]\nagents = ["model"]\n',
            "matches no task",
        ),
        (
            'name = "x"\ntasks = ["py-one-line-fix"]\nprofiles = ["tiny"]\n'
            'agents = ["scripted:oracle"]\n',
            "no scripts/oracle.json",
        ),
        (
            'name = "x"\ntasks = ["py-one-line-fix"]\nprofiles = ["nope"]\nagents = ["model"]\n',
            "nope",
        ),
        ('name = "x"\ntasks = ["../etc"]\nprofiles = ["tiny"]\nagents = ["model"]\n', "tasks"),
        (
            'name = "x"\ntasks = ["py-one-line-fix"]\nprofiles = ["tiny"]\nagents = ["human"]\n',
            "agents",
        ),
        (
            'name = "x"\ntasks = ["py-one-line-fix"]\nprofiles = ["tiny"]\nagents = ["model"]\n'
            "extra = 1\n",
            "extra",
        ),
    ],
)
def test_a_suite_that_cannot_run_is_refused(tmp_path: Path, body: str, says: str) -> None:
    with pytest.raises(SuiteError, match=says):
        load_suite(suite_file(tmp_path, body), TASKS)


def test_the_suite_digest_is_of_the_files_bytes(tmp_path: Path) -> None:
    body = 'name = "x"\ntasks = ["py-one-line-fix"]\nprofiles = ["tiny"]\nagents = ["model"]\n'
    a = load_suite(suite_file(tmp_path, body), TASKS)
    b = load_suite(suite_file(tmp_path, body + "# a comment\n"), TASKS)
    assert a.members[0].task == b.members[0].task and a.sha256 != b.sha256
