"""The single-node test cluster for SlurmExecutor's integration tests.

Why a fixture that runs .ci/slurm-up (and not only `make test`, as libvirtd): the script
is idempotent and returns in ~0.1 s when the cluster answers, so a targeted
`pytest tests/harness/suite -m integration` needs no separate set-up step. A cluster
that cannot be started fails the test (never a skip: CI must run these).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.suite.executor import MemberEnd, MemberJob
from harness.suite.slurm import SlurmExecutor

REPO = Path(__file__).parents[3]


def slurm_up() -> None:
    done = subprocess.run(
        ["bash", str(REPO / ".ci" / "slurm-up")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.fail(f".ci/slurm-up failed: {done.stderr.strip()[-400:]}")


class Recorder:
    """The executor's progress calls, and each member's Slurm job id (from SUBMITTED)."""

    def __init__(self) -> None:
        self.words: dict[str, list[str]] = {}
        self.job_ids: dict[str, str] = {}

    def __call__(self, member_id: str, word: str) -> None:
        self.words.setdefault(member_id, []).append(word)
        if word.startswith("SUBMITTED "):
            self.job_ids[member_id] = word.split()[1]

    def saw(self, member_id: str, word: str) -> bool:
        return word in self.words.get(member_id, [])


async def run_members(
    jobs: Sequence[MemberJob],
    recorder: Recorder,
    cancel: asyncio.Event | None = None,
    executor: SlurmExecutor | None = None,
) -> list[MemberEnd]:
    runner = executor or SlurmExecutor(poll_s=0.5, workdir=REPO)
    return await runner.run(jobs, cancel or asyncio.Event(), recorder)
