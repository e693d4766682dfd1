"""`harness view`: a static page, no network resources, every section present."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from harness.report.page import render
from receipts.audit import audit_and_read
from receipts.bundle import bundle_bytes
from receipts.records import MemoryRecord, MemorySample
from tests.receipts import tamper
from tests.receipts.builders import accepted_model_trial, replace
from tests.receipts.legacy import v1_receipt


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def _page(data: bytes) -> tuple[str, _Collect]:
    html = render(*audit_and_read(data))
    parser = _Collect()
    parser.feed(html)
    return html, parser


def test_page_has_every_section_and_no_external_resource() -> None:
    samples = tuple(
        MemorySample(
            at_ms=i * 50,
            host_available_bytes=(1 << 34) - i,
            host_page_cache_bytes=1 << 30,
            qemu_usage_bytes=1 << 29,
            qemu_working_set_bytes=1 << 28,
            worker_usage_bytes=None,
            worker_working_set_bytes=None,
        )
        for i in range(10)
    )
    records = dataclasses.replace(
        accepted_model_trial(), memory=MemoryRecord(interval_ms=50, samples=samples)
    )
    html, parsed = _page(bundle_bytes(records))
    for heading in (
        "Stage timeline",
        "Memory",
        "Tool calls",
        "Verification",
        "Cleanup",
        "Host state",
        "Digests",
    ):
        assert f"<h2>{heading}</h2>" in html
    assert "accepted" in html and "guestfwd_unix" in html
    # the timeline, and one chart per memory series that was read (host available, page
    # cache, QEMU working set); the worker's, never read in these samples, has none
    assert "polyline" in html and parsed.tags.count("svg") == 4
    assert "worker cgroup working set" not in html
    assert not {"script", "link", "img", "iframe", "object"} & set(parsed.tags)
    assert not any(name in {"src", "href"} for name, _value in parsed.attrs)
    assert not re.search(r"https?://", html)
    assert "default-src 'none'" in html


def test_invalid_receipt_shows_its_findings_and_no_verdict() -> None:
    data = bundle_bytes(accepted_model_trial())
    html, _ = _page(tamper.flip_byte(data, tamper.payload_offset(data, "vm.json") + 3))
    assert "INVALID" in html and "crc_mismatch" in html
    assert "<h2>Tool calls</h2>" not in html


def test_view_command_writes_the_page(tmp_path: Path) -> None:
    receipt = tmp_path / "r.zip"
    receipt.write_bytes(bundle_bytes(accepted_model_trial()))
    out = tmp_path / "report.html"
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "view", str(receipt), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert out.read_text().startswith("<!doctype html>")


def _host_state_section(html: str) -> str:
    return html.split("<h2>Host state</h2>", 1)[1].split("<h2>", 1)[0]


def test_an_old_receipt_shows_its_host_state_version() -> None:
    """A hoststate/1 receipt (an older harness; tests/receipts/fixtures) renders, and says
    it is /1 and left nothing out rather than looking checked for exclusions."""
    html, _ = _page(v1_receipt())  # with the cleanup receipts a real one has
    assert "audit: valid" in html and "accepted" in html
    section = _host_state_section(html)
    assert "<code>harness.receipt.hoststate/1</code>: written before exclusions existed" in section
    assert section.count("<td>0 / 0</td>") == 10  # other trials' and no trial's, 5 facets


def test_a_hoststate_2_receipt_says_other_programs_were_compared() -> None:
    fixture = Path(__file__).parents[1] / "receipts" / "fixtures" / "hoststate-v2-golden.zip"
    html, _ = _page(fixture.read_bytes())
    assert "audit: valid" in html
    section = _host_state_section(html)
    assert "<code>harness.receipt.hoststate/2</code>: no other live trial" in section
    assert "other programs' were compared" in section


def test_a_current_receipt_names_the_trials_it_left_out() -> None:
    records = accepted_model_trial()
    assert records.hoststate is not None
    other = "fedcba9876543210"  # not this trial's tag: that would be refused
    assert records.trial is not None and not records.trial.trial_id.startswith(other)
    cgroups = records.hoststate.cgroups.model_copy(update={"excluded_after": 2})
    excused = replace(records.hoststate, cgroups=cgroups, excluded_trials=(other,))
    html, _ = _page(bundle_bytes(dataclasses.replace(records, hoststate=excused)))
    section = _host_state_section(html)
    assert "<code>harness.receipt.hoststate/3</code>: left out as other live trials'" in section
    assert f"<code>{other}</code>" in section
    assert "<td>cgroups</td><td>unchanged</td>" in section and "<td>0 / 2</td>" in section
    assert "other programs' were compared" not in section
    plain = _host_state_section(_page(bundle_bytes(accepted_model_trial()))[0])
    assert "hoststate/3</code>: no other live trial's items were left out" in plain


def test_a_current_receipt_counts_items_of_no_trial() -> None:
    records = accepted_model_trial()
    assert records.hoststate is not None
    sockets = records.hoststate.listening_sockets.model_copy(
        update={"unrelated_before": 3, "unrelated_after": 7}
    )
    busy = replace(records.hoststate, listening_sockets=sockets)
    section = _host_state_section(
        _page(bundle_bytes(dataclasses.replace(records, hoststate=busy)))[0]
    )
    assert "<td>0 / 0</td><td>3 / 7</td></tr>" in section


def test_the_request_table_says_how_tools_reached_the_model() -> None:
    requests = accepted_model_trial().worker_requests
    generic = tuple(r.model_copy(update={"tools_rendering": "generic"}) for r in requests)
    html, _parsed = _page(bundle_bytes(dataclasses.replace(accepted_model_trial(),
                                                           worker_requests=generic)))  # fmt: skip
    assert "<th>tools</th>" in html
    assert html.count("<td>generic</td>") == len(requests)


def test_the_verification_table_says_where_the_judge_ran() -> None:
    """verification/3 names the judge (split, in_process, not_run); a /2 receipt did not
    record it and is shown as in process, which it was."""
    from receipts.records import VerificationRecord

    records = accepted_model_trial()
    assert isinstance(records.verification, VerificationRecord)
    html, _ = _page(bundle_bytes(records))
    assert "<th>judge</th>" in html
    assert f"<td>{records.verification.judge}</td>" in html
    fixture = Path(__file__).parents[1] / "receipts" / "fixtures" / "verification-v2-golden.zip"
    old, _ = _page(fixture.read_bytes())
    assert "<td>not recorded (in process)</td>" in old
