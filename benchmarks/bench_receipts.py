"""Receipt write and audit cost, side by side with hashing the same bytes.

Run: .venv/bin/python -m benchmarks.bench_receipts [--turns N] [--repeat R]

A trial's receipt grows with its turns and tool calls. This measures, in one process
and one run, the time to write the bundle and to audit it against the floor of reading
its bytes with hashlib alone, and prints ratios (not absolute goals: machines differ).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import statistics
import time
from collections.abc import Callable

from receipts.audit import audit_bytes
from receipts.bundle import bundle_bytes
from receipts.records import AgentTurnRecord, ToolCallRecord
from receipts.recordset import RecordSet
from tests.receipts.builders import accepted_scripted_trial, replace


def scripted_trial_with(turns: int) -> RecordSet:
    """A consistent scripted receipt with `turns` tool-call turns."""
    base = accepted_scripted_trial()
    assert base.agent is not None
    turn, call = base.agent_turns[0], base.tool_calls[0]
    agent_turns = tuple(replace(turn, index=i) for i in range(turns))
    tool_calls = tuple(replace(call, index=i, turn=i) for i in range(turns))
    assert all(isinstance(t, AgentTurnRecord) for t in agent_turns)
    assert all(isinstance(c, ToolCallRecord) for c in tool_calls)
    agent = replace(base.agent, turns=turns, tool_calls=turns)
    return dataclasses.replace(base, agent=agent, agent_turns=agent_turns, tool_calls=tool_calls)


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    records = scripted_trial_with(args.turns)
    data = bundle_bytes(records)
    result = audit_bytes(data)
    assert result.valid, result.findings
    hash_s = median_seconds(lambda: hashlib.sha256(data).hexdigest(), args.repeat)
    write_s = median_seconds(lambda: bundle_bytes(records), args.repeat)
    audit_s = median_seconds(lambda: audit_bytes(data), args.repeat)
    entries = 2 * args.turns + 14
    print(f"receipt: {args.turns} turns, ~{entries} entries, {len(data):,} bytes")
    print(f"sha256 of the ZIP   {hash_s * 1e3:9.2f} ms  (floor)")
    print(f"write bundle        {write_s * 1e3:9.2f} ms  ({write_s / hash_s:,.0f}x floor)")
    print(f"audit bundle        {audit_s * 1e3:9.2f} ms  ({audit_s / hash_s:,.0f}x floor)")
    print(f"audit per entry     {audit_s / entries * 1e6:9.1f} us")


if __name__ == "__main__":
    main()
