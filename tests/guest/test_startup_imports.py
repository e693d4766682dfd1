"""What the guest's agent and verifier load at start-up, of the record models.

Under TCG every pydantic model class built at import costs the guest time before the
agent's first step and before the hidden tests run (`python -X importtime` in a
guest: importing every record kind was ~2 s of the agent's 6 s). Each guest program
loads the record modules it writes and their own imports, nothing else:
`receipts.records` resolves its names lazily and the totals live apart from
`receipts.claim` (which needs every kind).

Mutation controls: an eager import of every kind in `receipts/records/__init__.py`,
or guest/agent/loop.py taking `agent_totals` from `receipts.claim`, fails this test.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

ALLOWED = {
    "guest.agent.loop": {"agent", "base", "hostreading", "trial"},
    "guest.verify.run": {"agent", "base", "hostreading", "trial", "verification"},
}


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_a_guest_program_loads_only_the_record_modules_it_needs(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "print(' '.join(sorted(m.rsplit('.', 1)[1] for m in sys.modules"
        " if m.startswith('receipts.records.'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(done.stdout.split())
    assert loaded <= ALLOWED[module], sorted(loaded - ALLOWED[module])
    assert "base" in loaded  # the probe reads real imports, not an empty list
