"""Reading what the guest (or a worker) wrote: bytes in, closed records or a closed refusal.

Why a module of its own: the guest is the untrusted side of a trial (the agent's code
runs there), and its record files are the evidence the receipt is built from. Plain
`json.loads` takes a duplicate key (which value was meant?), `NaN`, an overflowing
float and a UTF-16 byte stream without a word, and a malformed file escaped as a
generic exception that ended the trial as `failed_internal` (our defect) instead of
naming what the guest did. Here every read goes through `receipts.strictjson` (the one
definition of strict JSON) and then the record's closed schema, and every refusal is a
`GuestOutputInvalid` with a closed `kind`. The pipeline turns a refusal into the
stage's `records_invalid` category; the stand-in records for that, and for a command
that ended without a record (guestcmd.command_failure), are built here too, so their
shape is tested without a VM.

All or nothing: a file with one bad line is refused whole. Keeping the lines that did
parse would let a partial file pass for a complete count.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Final, Literal

from pydantic import ValidationError

from receipts.agentclis import AgentIdentity
from receipts.records import (
    AgentRecord,
    AgentTurnRecord,
    ToolCallRecord,
    VerificationRecord,
    WorkerRequestRecord,
)
from receipts.records.hostreading import HOST_READINGS, HostReading, VerifierHostReading
from receipts.records.trial import Policy
from receipts.records.verification import VERIFICATION_HOST_READINGS
from receipts.records.worker import ConnectionRefusals, WorkerConnectionLine
from receipts.strictjson import JsonValue, StrictJsonError, StrictJsonKind, loads_strict
from receipts.totals import agent_totals

GuestOutputFault = Literal[StrictJsonKind, "not_an_object", "schema_invalid", "too_large"]
"""Why a guest output was refused: strict JSON's own kinds, a document that is not the
object the format requires, an object that its closed schema refuses, or a file over
the transfer limit (refused before it is read, never cut)."""

AGENT_PARTS = ("agent", "tool_calls", "turns")
"""The keys of the agent's record file (guest/agent/__main__.py `records_json`), no others."""


class GuestOutputInvalid(ValueError):
    """A guest output that is not strict JSON of its closed shape; `kind` says how."""

    def __init__(self, kind: GuestOutputFault) -> None:
        super().__init__(kind)
        self.kind: GuestOutputFault = kind


@dataclass(frozen=True)
class AgentOutput:
    agent: AgentRecord
    turns: tuple[AgentTurnRecord, ...]
    tool_calls: tuple[ToolCallRecord, ...]


def strict_document(data: bytes) -> JsonValue:
    """`data` as one strict JSON document, or `GuestOutputInvalid` with strict JSON's kind."""
    try:
        return loads_strict(data)
    except StrictJsonError as exc:
        raise GuestOutputInvalid(exc.kind) from None


def strict_object(data: bytes) -> dict[str, JsonValue]:
    """`data` as one strict JSON object (the only top level any of our outputs has)."""
    value = strict_document(data)
    if not isinstance(value, dict):
        raise GuestOutputInvalid("not_an_object")
    return value


def read_agent_output(data: bytes, launched: AgentIdentity) -> AgentOutput:
    """The agent's record file: `{agent, turns, tool_calls}` of closed records, exactly. An
    agent record that claims one of the host's own readings (`records_invalid`,
    `exited_nonzero`, ...) is refused too: a guest could otherwise pass off a record with
    its counts for the host's stand-in. So is one that names another agent than the one
    the host launched (`launched`): the record says whose code ran, and that is the
    host's to know, not the guest's to choose."""
    value = strict_object(data)
    turns, calls = value.get("turns"), value.get("tool_calls")
    if sorted(value) != list(AGENT_PARTS) or not isinstance(turns, list):
        raise GuestOutputInvalid("schema_invalid")
    if not isinstance(calls, list):
        raise GuestOutputInvalid("schema_invalid")
    try:
        output = AgentOutput(
            agent=AgentRecord.model_validate(value["agent"]),
            turns=tuple(AgentTurnRecord.model_validate(turn) for turn in turns),
            tool_calls=tuple(ToolCallRecord.model_validate(call) for call in calls),
        )
    except ValidationError:
        raise GuestOutputInvalid("schema_invalid") from None
    if output.agent.category in HOST_READINGS or identity_of(output.agent) != launched:
        raise GuestOutputInvalid("schema_invalid")
    return output


def identity_of(record: AgentRecord) -> AgentIdentity:
    return AgentIdentity(record.agent, record.agent_version, record.agent_sha256)


def read_verification(data: bytes) -> VerificationRecord:
    """The verifier's record file: one closed VerificationRecord. A record that claims one of
    the host's own readings is refused too: only the host reads a command's end so."""
    strict_object(data)
    try:
        record = VerificationRecord.model_validate_json(data)
    except ValidationError:
        raise GuestOutputInvalid("schema_invalid") from None
    if record.category in VERIFICATION_HOST_READINGS:
        raise GuestOutputInvalid("schema_invalid")
    return record


def read_request_lines(data: bytes) -> tuple[WorkerRequestRecord, ...]:
    """The worker's request records, one JSON object per line (blank lines skipped);
    its connection lines are checked too, and counted by `connection_refusals`."""
    return read_worker_lines(data)[0]


def connection_refusals(data: bytes) -> ConnectionRefusals:
    """The connections the worker's server refused, counted by cause from its lines."""
    return read_worker_lines(data)[1]


def read_worker_lines(data: bytes) -> tuple[tuple[WorkerRequestRecord, ...], ConnectionRefusals]:
    """Every line of the worker's records file: a strict, closed request record or
    connection line, or `GuestOutputInvalid` for the whole file."""
    records: list[WorkerRequestRecord] = []
    refusals: Counter[str] = Counter()
    for line in data.splitlines():
        if not line.strip():
            continue
        fields = strict_object(line)
        try:
            if fields.get("schema") == WorkerConnectionLine.schema_id():
                refusals[WorkerConnectionLine.model_validate_json(line).refusal] += 1
            else:
                records.append(WorkerRequestRecord.model_validate_json(line))
        except ValidationError:
            raise GuestOutputInvalid("schema_invalid") from None
    counts = {name: refusals[name] for name in ConnectionRefusals.model_fields}
    return tuple(records), ConnectionRefusals(**counts)


NO_REFUSALS: Final = ConnectionRefusals(over_limit=0, header_timeout=0, body_timeout=0, unframed=0)
"""The counts of a worker whose lines were not read (its category says why)."""


def unread_agent_record(
    policy: Policy, launched: AgentIdentity, reading: HostReading = "records_invalid"
) -> AgentRecord:
    """The agent stage's record when its file was refused, or its command ended without one
    (`reading` names which): the failure is named, and every count is 0 because nothing
    was read (no turn or tool-call record is kept either, so the audit's counts agree);
    nothing of the guest's confinement was read either (`unread`, no process count). The
    agent is the one the host launched."""
    return AgentRecord(
        category=reading,
        policy=policy,
        agent=launched.name,
        agent_version=launched.version,
        agent_sha256=launched.sha256,
        **agent_totals((), ()),
        processes_left=None,
        agent_cgroup="unread",
        duration_ms=0,
    )


def unread_verification_record(
    reading: HostReading | VerifierHostReading = "records_invalid",
) -> VerificationRecord:
    """The verification stage's record when its file was refused, or its command ended
    without one (`reading` names which): failed, no digests (none was read), counts 0 and
    network isolation `unread`, no workspace digest, no flags."""
    return VerificationRecord(
        category=reading,
        result="failed",
        task_sha256=None,
        tests_expected=0,
        report_ids="unread",
        tests_passed=0,
        tests_failed=0,
        tests_errored=0,
        fixture_changed=False,
        files_changed=0,
        final_diff_sha256=None,
        workspace_sha256=None,
        suspicious_changes=(),
        net_isolation="unread",
        judge="not_run",
        duration_ms=0,
    )
