"""The wheel set: keyed by its request offline, adopted without pip, refused when changed.

The requirement used for adoption does not exist on the index, so any call to pip
would fail: adoption succeeding proves no fetch happened. The no-network case runs in
a new network namespace (`unshare -n`).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from host.wheelset import SIDECAR, WheelSetError, ensure_wheelset, request_key
from receipts.canonical import canonical

ABSENT = ["harness-offline-probe==0.0.0"]
"""A requirement no index serves."""
WHEEL = "harness_offline_probe-0.0.0-py3-none-any.whl"


def cached_set(root: Path, requirements: list[str] = ABSENT) -> Path:
    """A wheel-set entry as ensure_wheelset writes it."""
    key = request_key(requirements)
    entry = root / key
    entry.mkdir(parents=True)
    data = b"PK not really a zip, never unpacked here" * 100
    (entry / WHEEL).write_bytes(data)
    sidecar = {
        "schema": "harness.wheelset/1",
        "key": key,
        "requirements": sorted(requirements),
        "wheels": [{"name": WHEEL, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}],
    }
    (entry / SIDECAR).write_bytes(canonical(sidecar))
    return entry


def test_the_request_key_is_local_and_order_free() -> None:
    key = request_key(["a==1", "b==2"])
    assert key == request_key(["b==2", "a==1"])
    assert key != request_key(["a==1", "b==3"])
    assert key != request_key(["a==1"])


def test_a_cached_set_is_adopted_without_pip(tmp_path: Path) -> None:
    entry = cached_set(tmp_path)
    adopted = ensure_wheelset(ABSENT, tmp_path)
    assert adopted.key == entry.name and not adopted.fetched_by_this_run
    assert [w.path for w in adopted.wheels] == [entry / WHEEL]
    assert adopted.wheels[0].sha256 == hashlib.sha256((entry / WHEEL).read_bytes()).hexdigest()


def _flip(entry: Path) -> None:
    data = bytearray((entry / WHEEL).read_bytes())
    data[7] ^= 1
    (entry / WHEEL).write_bytes(bytes(data))


def _extra(entry: Path) -> None:
    (entry / "other-1.0-py3-none-any.whl").write_bytes(b"x")


def _missing(entry: Path) -> None:
    (entry / WHEEL).unlink()


def _pretty(entry: Path) -> None:
    value = json.loads((entry / SIDECAR).read_bytes())
    (entry / SIDECAR).write_text(json.dumps(value, indent=1, sort_keys=True))


def _other_key(entry: Path) -> None:
    value = json.loads((entry / SIDECAR).read_bytes())
    value["key"] = "0" * 64
    (entry / SIDECAR).write_bytes(canonical(value))


def _size(entry: Path) -> None:
    value = json.loads((entry / SIDECAR).read_bytes())
    value["wheels"][0]["size"] += 1
    (entry / SIDECAR).write_bytes(canonical(value))


def _symlink(entry: Path) -> None:
    (entry / WHEEL).rename(entry.parent / WHEEL)
    (entry / WHEEL).symlink_to(entry.parent / WHEEL)


@pytest.mark.parametrize("tamper", [_flip, _extra, _missing, _pretty, _other_key, _size, _symlink])
def test_a_changed_entry_is_refused_not_refetched(tmp_path: Path, tamper: object) -> None:
    entry = cached_set(tmp_path)
    assert callable(tamper)
    tamper(entry)
    with pytest.raises(WheelSetError) as err:
        ensure_wheelset(ABSENT, tmp_path)
    assert err.value.category == "cache_corrupt"


_ENSURE = """
import sys
from pathlib import Path
from host.wheelset import WheelSetError, ensure_wheelset
try:
    ensure_wheelset(["pydantic==2.14.3"], Path(sys.argv[1]))
    print("fetched")
except WheelSetError as exc:
    print(exc.category)
"""


def test_a_missing_set_with_no_network_is_fetch_failed(tmp_path: Path) -> None:
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", _ENSURE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "fetch_failed\n"), done.stderr[-2000:]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert [n for n in left if not n.endswith(".lock")] == []  # nothing half-fetched is left
