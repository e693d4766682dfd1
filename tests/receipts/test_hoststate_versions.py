"""Receipts written by older harnesses (hoststate/1, /2) still audit; the versions stay closed.

`fixtures/hoststate-v1-golden.zip` is a real old receipt, not a reconstruction: it is
`bundle_bytes(accepted_model_trial())` produced by the code of commit 810ee03 (f56d4a9^,
the last commit that wrote `harness.receipt.hoststate/1`) in a scratch worktree, the
same path `test_bundle.py`'s golden digest test takes. Its SHA-256 is the golden digest
that test asserted at that commit, so the bytes are exactly what the old writer made.
Every tamper below starts from it (or, for `/2`, from a receipt the current writer
makes) and changes one thing, re-forging the manifest so that only the schema, the
consistency or the verdict rules can catch it.

`fixtures/hoststate-v2-golden.zip` is made the same way by the code of 6d96414 (a commit
that wrote `harness.receipt.hoststate/2`, and `memory/1`): its SHA-256 is the golden
digest test_bundle.py asserted there.

All four `fixtures/*-golden.zip` were then re-forged once (2026-12-02), changing one
field: `model.json`'s `cache_key`, from the old builders' placeholder (`33…33`, which no
inputs give) to the key its own pins, converter and file type give (receipts/modelkey.py),
and the manifest entry for it. Real receipts always carried that key; the audit now
checks it (`model_cache_key`), and a placeholder would fail it. Every other byte of
every entry is the old writer's (checked entry by entry when re-forging).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pydantic
import pytest

from receipts.audit import audit_and_read, audit_bytes
from receipts.bundle import bundle_entries
from receipts.canonical import canonical
from receipts.records import HostStateRecord
from receipts.records.legacy import (
    HostStateRecordV1,
    HostStateRecordV2,
    facet_exclusions,
    facet_unrelated,
)
from receipts.recordset import MANIFEST_NAME
from tests.receipts import tamper
from tests.receipts.builders import accepted_model_trial
from tests.receipts.legacy import FIXTURE
from tests.receipts.legacy import fixture_entries as _fixture_entries
from tests.receipts.legacy import v1_entries as _v1_entries

FIXTURE_V2 = Path(__file__).parent / "fixtures" / "hoststate-v2-golden.zip"
V2_GOLDEN_ZIP_SHA256 = "006201119b9ba005b6d20fbc08429b7b612f961a2a8695dbdaef88a633b70961"
"""GOLDEN_ZIP_SHA256 of tests/receipts/test_bundle.py at 6d96414, before hoststate/3."""

OLD_GOLDEN_ZIP_SHA256 = "e94bf79df2126c9b866e2ebc10b53124f03a8e3eda123d20fa45206024215a9a"
"""GOLDEN_ZIP_SHA256 of tests/receipts/test_bundle.py at 810ee03, before hoststate/2."""

FACETS = ("routes", "resolver", "listening_sockets", "cgroups", "firewall")
OTHER_TAG = "fedcba9876543210"  # another trial (the builders' trial id starts 0123...)


def _v2_entries() -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(FIXTURE_V2.read_bytes())) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _with_hoststate(entries: dict[str, bytes], hoststate: dict[str, Any]) -> bytes:
    """`entries` with hoststate.json replaced, under a manifest that matches again."""
    return tamper.forge({**entries, "hoststate.json": canonical(hoststate)})


def _v1_hoststate() -> dict[str, Any]:
    value = json.loads(_v1_entries()["hoststate.json"])
    assert isinstance(value, dict)
    return value


def _v2_hoststate() -> dict[str, Any]:
    value = json.loads(_v2_entries()["hoststate.json"])
    assert isinstance(value, dict)
    return value


def _v3_hoststate() -> dict[str, Any]:
    value = json.loads(bundle_entries(accepted_model_trial())["hoststate.json"])
    assert isinstance(value, dict)
    return value


def _categories(data: bytes, disabled: frozenset[str] = frozenset()) -> set[str]:
    return {finding.category for finding in audit_bytes(data, disabled).findings}


def test_the_fixture_is_the_old_writers_golden_receipt() -> None:
    data = FIXTURE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == OLD_GOLDEN_ZIP_SHA256
    hoststate = _v1_hoststate()
    assert hoststate["schema"] == "harness.receipt.hoststate/1"
    assert set(hoststate) == {"schema", *FACETS}
    assert all(
        set(hoststate[facet]) == {"before_sha256", "after_sha256", "result", "raw_bytes"}
        for facet in FACETS
    )


def test_the_fixture_as_written_lacks_required_cleanup_receipts() -> None:
    """The coverage rule on a receipt the old writer really made: refused, by that rule
    alone (the other findings are the verdict it then claims over missing evidence)."""
    result = audit_bytes(FIXTURE.read_bytes())
    assert not result.valid
    assert {f.category for f in result.findings} == {"cleanup_missing", "verdict_mismatch"}
    assert _categories(FIXTURE.read_bytes(), frozenset({"cleanup_coverage"})) == {
        "verdict_mismatch"
    }


def test_an_old_receipt_audits_valid_with_its_verdict() -> None:
    data = tamper.forge(_v1_entries())
    result, records = audit_and_read(data)
    assert result.valid, result.findings
    assert result.derived_verdict == result.claimed_verdict == "accepted"
    assert result.receipt_id == hashlib.sha256(_v1_entries()[MANIFEST_NAME]).hexdigest()
    assert records is not None
    assert isinstance(records.hoststate, HostStateRecordV1)


def test_a_hoststate_2_receipt_audits_valid_with_its_verdict() -> None:
    data = FIXTURE_V2.read_bytes()
    assert hashlib.sha256(data).hexdigest() == V2_GOLDEN_ZIP_SHA256
    assert _v2_hoststate()["schema"] == "harness.receipt.hoststate/2"
    result, records = audit_and_read(data)
    assert result.valid, result.findings
    assert result.derived_verdict == result.claimed_verdict == "accepted"
    assert records is not None
    assert isinstance(records.hoststate, HostStateRecordV2)


def test_a_current_receipt_reads_as_hoststate_3() -> None:
    data = tamper.forge_records(accepted_model_trial())
    result, records = audit_and_read(data)
    assert result.valid, result.findings
    assert records is not None and isinstance(records.hoststate, HostStateRecord)
    assert _v3_hoststate()["schema"] == "harness.receipt.hoststate/3"


def test_a_damaged_old_receipt_still_fails() -> None:
    data = FIXTURE.read_bytes()
    flipped = tamper.flip_byte(data, tamper.payload_offset(data, "hoststate.json") + 40)
    assert "crc_mismatch" in _categories(flipped)
    entries = _fixture_entries()
    entries["hoststate.json"] = entries["hoststate.json"].replace(b'"1111', b'"2111', 1)
    assert "manifest_digest_mismatch" in _categories(tamper.forge(entries, fix_manifest=False))


@pytest.mark.parametrize(
    ("result", "verdict"), [("changed", "failed_host_state"), ("unread", "evidence_incomplete")]
)
def test_the_verdict_reads_an_old_records_facets(result: str, verdict: str) -> None:
    """An older harness's truthful report of a changed or unread facet: a valid receipt
    with that verdict; claiming `accepted` over it is a verdict mismatch."""
    hoststate = _v1_hoststate()
    hoststate["listening_sockets"] = {**hoststate["listening_sockets"], "result": result}
    entries = _v1_entries()
    entries["hoststate.json"] = canonical(hoststate)
    overclaimed = tamper.forge(entries)
    assert _categories(overclaimed) == {"verdict_mismatch"}
    truthful = tamper.forge(tamper.edit_json(entries, "trial.json", verdict=verdict))
    checked = audit_bytes(truthful)
    assert checked.valid, checked.findings
    assert checked.derived_verdict == verdict


def _v1_with_facet_exclusions() -> dict[str, Any]:
    hoststate = _v1_hoststate()
    hoststate["cgroups"] = {**hoststate["cgroups"], "excluded_before": 0, "excluded_after": 1}
    return hoststate


def _v1_with_excluded_trials() -> dict[str, Any]:
    return {**_v1_hoststate(), "excluded_trials": [OTHER_TAG]}


def _v1_with_both() -> dict[str, Any]:
    return {**_v1_with_facet_exclusions(), "excluded_trials": [OTHER_TAG]}


def _v1_relabelled_as_v2() -> dict[str, Any]:
    return {**_v1_hoststate(), "schema": "harness.receipt.hoststate/2"}


def _v2_without_excluded_trials() -> dict[str, Any]:
    hoststate = _v2_hoststate()
    del hoststate["excluded_trials"]
    return hoststate


def _v2_facet_without_counts() -> dict[str, Any]:
    hoststate = _v2_hoststate()
    hoststate["routes"] = {
        k: v
        for k, v in hoststate["routes"].items()
        if k not in {"excluded_before", "excluded_after"}
    }
    return hoststate


def _v2_relabelled_as_v1() -> dict[str, Any]:
    """A /2 record claiming /1: its exclusion fields do not exist in /1."""
    return {**_v2_hoststate(), "schema": "harness.receipt.hoststate/1"}


def _v2_facet_carries_v3_counts() -> dict[str, Any]:
    hoststate = _v2_hoststate()
    hoststate["cgroups"] = {**hoststate["cgroups"], "unrelated_before": 0, "unrelated_after": 2}
    return hoststate


def _v2_relabelled_as_v3() -> dict[str, Any]:
    """A /2 record claiming /3: it has no counts of items of no trial."""
    return {**_v2_hoststate(), "schema": "harness.receipt.hoststate/3"}


def _v3_relabelled_as_v2() -> dict[str, Any]:
    """A /3 record claiming /2: its counts of items of no trial do not exist in /2."""
    return {**_v3_hoststate(), "schema": "harness.receipt.hoststate/2"}


def _v3_facet_without_unrelated() -> dict[str, Any]:
    hoststate = _v3_hoststate()
    hoststate["cgroups"] = {
        k: v
        for k, v in hoststate["cgroups"].items()
        if k not in {"unrelated_before", "unrelated_after"}
    }
    return hoststate


CLOSED_CASES = {
    "v1_facet_carries_v2_counts": (_v1_with_facet_exclusions, "schema_extra_field"),
    "v1_carries_excluded_trials": (_v1_with_excluded_trials, "schema_extra_field"),
    "v1_carries_every_v2_field": (_v1_with_both, "schema_extra_field"),
    "v2_relabelled_as_v1": (_v2_relabelled_as_v1, "schema_extra_field"),
    "v1_relabelled_as_v2": (_v1_relabelled_as_v2, "schema_missing_field"),
    "v2_without_excluded_trials": (_v2_without_excluded_trials, "schema_missing_field"),
    "v2_facet_without_counts": (_v2_facet_without_counts, "schema_missing_field"),
    "v2_facet_carries_v3_counts": (_v2_facet_carries_v3_counts, "schema_extra_field"),
    "v2_relabelled_as_v3": (_v2_relabelled_as_v3, "schema_missing_field"),
    "v3_relabelled_as_v2": (_v3_relabelled_as_v2, "schema_extra_field"),
    "v3_facet_without_unrelated": (_v3_facet_without_unrelated, "schema_missing_field"),
}


def _v3_entries() -> dict[str, bytes]:
    return bundle_entries(accepted_model_trial())


BASES = {"v1": _v1_entries, "v2": _v2_entries, "v3": _v3_entries}


@pytest.mark.parametrize("name", sorted(CLOSED_CASES))
def test_each_version_has_exactly_its_own_fields(name: str) -> None:
    build, category = CLOSED_CASES[name]
    base = BASES[name[:2]]()
    data = _with_hoststate(base, build())
    result = audit_bytes(data)
    assert not result.valid
    assert {(f.category, f.entry) for f in result.findings} == {(category, "hoststate.json")}
    assert category not in _categories(data, frozenset({"schema_valid"}))  # load-bearing


@pytest.mark.parametrize(
    "schema",
    [
        "harness.receipt.hoststate/4",
        "harness.receipt.hoststate/0",
        "harness.receipt.hoststate/01",
        "harness.receipt.hoststate/1 ",
        "harness.receipt.hoststate",
        "harness.receipt.vm/1",
        1,
        None,
    ],
)
@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_an_unknown_version_is_a_schema_mismatch(schema: object, version: str) -> None:
    hoststates = {"v1": _v1_hoststate, "v2": _v2_hoststate, "v3": _v3_hoststate}
    base, hoststate = BASES[version](), hoststates[version]()
    data = _with_hoststate(base, {**hoststate, "schema": schema})
    result = audit_bytes(data)
    assert {(f.category, f.entry) for f in result.findings} == {
        ("schema_mismatch", "hoststate.json")
    }
    assert "schema_mismatch" not in _categories(data, frozenset({"schema_id"}))  # load-bearing


def test_each_version_s_facet_counts_mean_what_that_harness_left_out() -> None:
    """The report reads every version's counts through `facet_exclusions` and
    `facet_unrelated`: a `/3` facet gives its own counts, a `/2` facet its exclusions
    and no unrelated items (that harness compared them all), a `/1` facet nothing left
    out at all."""
    v3 = accepted_model_trial().hoststate
    assert isinstance(v3, HostStateRecord)
    counted = v3.cgroups.model_copy(
        update={
            "excluded_before": 1,
            "excluded_after": 2,
            "unrelated_before": 3,
            "unrelated_after": 4,
        }
    )
    assert (facet_exclusions(counted), facet_unrelated(counted)) == ((1, 2), (3, 4))
    v2 = HostStateRecordV2.model_validate_json(_v2_entries()["hoststate.json"]).cgroups
    v2 = v2.model_copy(update={"excluded_before": 5, "excluded_after": 6})
    assert (facet_exclusions(v2), facet_unrelated(v2)) == ((5, 6), (0, 0))
    v1 = HostStateRecordV1.model_validate_json(_v1_entries()["hoststate.json"]).cgroups
    assert (facet_exclusions(v1), facet_unrelated(v1)) == ((0, 0), (0, 0))


def _v2_with(**facets: tuple[int, int]) -> HostStateRecordV2:
    data = _v2_hoststate()
    for name, (before, after) in facets.items():
        data[name] = {**data[name], "excluded_before": before, "excluded_after": after}
    data["excluded_trials"] = [OTHER_TAG] if facets else []
    return HostStateRecordV2.model_validate_json(canonical(data))


@pytest.mark.parametrize("counts", [(0, 1), (1, 0), (2, 3)])
def test_a_hoststate_2_record_accounts_for_every_exclusion(counts: tuple[int, int]) -> None:
    """In a `/2` record an exclusion before or after (either alone) names its trial, and
    routes, resolver and firewall never exclude anything, even beside a cgroup facet
    that rightly does."""
    assert _v2_with(cgroups=counts).excluded_trials == (OTHER_TAG,)
    for never in ("routes", "resolver", "firewall"):
        with pytest.raises(pydantic.ValidationError):
            _v2_with(cgroups=(0, 1), **{never: counts})
