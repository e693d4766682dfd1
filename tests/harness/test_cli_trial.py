"""`harness trial` refuses what it cannot honestly run, before any stage starts; the
backend it drives is the one its record names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from harness.profiles import load_profile
from harness.trial.pipeline import Trial, TrialOptions
from host.vm.libvirt_backend import LibvirtBackend
from host.vm.qemu import QemuBackend

REPO = Path(__file__).parents[2]


@pytest.mark.parametrize("backend", ["qemu", "libvirt"])
def test_trial_drives_the_backend_it_records(
    backend: Literal["qemu", "libvirt"], tmp_path: Path
) -> None:
    options = TrialOptions(
        profile=load_profile("tiny"),
        task="py-one-line-fix",
        script=None,
        out_dir=tmp_path,
        backend=backend,
    )
    assert Trial(options).backend.name == backend
    other = QemuBackend() if backend == "libvirt" else LibvirtBackend()
    with pytest.raises(ValueError, match="backend"):
        Trial(options, backend=other)


def test_unreadable_script_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "harness.cli", "trial", "--profile", "tiny"),
            *("--agent", f"scripted:{tmp_path / 'missing.json'}", "--out", str(tmp_path)),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert "script file is not readable" in done.stderr
    assert list(tmp_path.iterdir()) == []
