"""The snapshot key and the data disk slot, without a guest."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

from host.vm.snapshot import DATA_SLOT_BYTES, SnapshotShape, data_slot
from receipts.snapshotkey import snapshot_key

SHAPE = SnapshotShape(
    image_key="a" * 64,
    accelerator="tcg",
    memory_mib=1024,
    vcpus=2,
    tb_size_mib=64,
    qemu="QEMU emulator version 7.2.22",
)


def test_the_key_changes_with_every_part_of_the_shape() -> None:
    changes: dict[str, object] = {
        "image_key": "0" * 64,
        "accelerator": "kvm",
        "memory_mib": 2048,
        "vcpus": 1,
        "tb_size_mib": 128,
        "qemu": "QEMU emulator version 0",
    }
    assert set(changes) == {f.name for f in dataclasses.fields(SnapshotShape)}
    keys = {dataclasses.replace(SHAPE, **{name: value}).key for name, value in changes.items()}  # type: ignore[arg-type]
    assert len(keys | {SHAPE.key}) == len(changes) + 1
    assert SHAPE.key == snapshot_key(**dataclasses.asdict(SHAPE))  # the receipts' own key


def test_the_data_slot_has_the_fixed_size_and_reads_through_to_the_disk(tmp_path: Path) -> None:
    raw = tmp_path / "data.img"
    raw.write_bytes(b"x" * 4096)
    for backing in (raw, None):
        directory = tmp_path / ("with" if backing else "without")
        directory.mkdir()
        slot = data_slot(directory, backing)
        info = json.loads(
            subprocess.run(
                ["qemu-img", "info", "--output=json", str(slot)],
                capture_output=True,
                check=True,
            ).stdout
        )
        assert info["virtual-size"] == DATA_SLOT_BYTES
        assert info.get("backing-filename") == (str(raw) if backing else None)
        assert slot.stat().st_mode & 0o777 == 0o600
    assert raw.read_bytes() == b"x" * 4096  # the trial's disk itself is never written
