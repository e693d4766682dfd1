"""The stages that run on the host before any guest: preflight, source, dispatch, model,
image. Each records what it found and raises StageFailed when that ends the trial."""

from __future__ import annotations

import time
from pathlib import Path

from harness.dispatch import DispatchRefused, admit, ledger_dir
from harness.profiles import Profile
from harness.source import bind_source
from harness.trial.context import Prepared, TrialOptions
from harness.trial.diskfiles import REPO
from harness.trial.evidence import Evidence, StageFailed
from harness.trial.modelstage import prepare
from harness.trial.preflight import preflight
from host.image.build import ensure_image, failure_record
from host.image.errors import ImageError
from receipts.records import DispatchRecord, SourceRecord


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


def preflight_stage(profile: Profile, cache: Path, evidence: Evidence) -> None:
    record = preflight(profile, cache)
    evidence.put("preflight", record)
    if record.category != "ok":
        raise StageFailed


def source_stage(refuse_dirty: bool, evidence: Evidence) -> None:
    """Bind the harness source; a dispatched trial refuses a dirty tree."""
    record = bind_source(REPO, refuse_dirty=refuse_dirty)
    evidence.put("source", record)
    if record.category != "ok":
        raise StageFailed


def dispatch_stage(options: TrialOptions, evidence: Evidence) -> None:
    """Consume the dispatch ticket against the source the source stage bound."""
    assert options.dispatch is not None
    source = evidence.records["source"]
    assert isinstance(source, SourceRecord)
    ledger = options.ledger or ledger_dir()
    try:
        record: DispatchRecord = admit(
            options.dispatch,
            options.profile.name,
            options.task,
            source,
            ledger,
            member=options.suite_member,
        )
    except DispatchRefused:
        raise StageFailed from None  # an unreadable ticket: nothing to record it against
    evidence.put("dispatch", record)
    if record.category != "ok":
        raise StageFailed


def model_stage(options: TrialOptions, prepared: Prepared, evidence: Evidence) -> None:
    """Hashing and conversion: minutes for a real model (the pipeline runs it in a thread)."""
    prepared.model = prepare(options.profile, options.cache, locks=options.locks)
    evidence.put("model", prepared.model.record)
    if prepared.model.record.category != "ok":
        raise StageFailed


def image_stage(cache: Path, prepared: Prepared, evidence: Evidence) -> None:
    started = time.monotonic()
    try:
        prepared.image = ensure_image(cache / "images")
    except ImageError as exc:
        evidence.put("image", failure_record(exc, _ms(started)))
        raise StageFailed from None
    evidence.put("image", prepared.image.to_record())
