"""`harness model prepare` as the operator runs it: closed, named refusals, no traceback.

Each test runs the real CLI in a child process with its own HOME (the model cache is
``~/.cache/harness``). A full disk is made two ways: a child whose files may not grow
past a limit (RLIMIT_FSIZE: the write fails mid-conversion), and a small tmpfs mounted
over the cache (free space is short before the conversion starts; needs root, as the
cgroup tests do).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from harness.profiles import load_profile
from harness.trial.modelstage import _synth_source

HARNESS = [sys.executable, "-m", "harness.cli"]
REPO = Path(__file__).resolve().parents[2]


def _prepare_tiny(home: Path, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def child() -> None:
        if limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [*HARNESS, "model", "prepare", "--profile", "tiny"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, "HOME": str(home)},
        preexec_fn=child,
    )


def _leftovers(models: Path) -> list[str]:
    """Entries and staging directories; an entry's fill lock (`.<key>.lock`, kept by
    design: receipts/staging.py) is neither."""
    if not models.exists():
        return []
    return sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock"))


def test_a_disk_that_fills_during_prepare_is_a_closed_refusal(tmp_path: Path) -> None:
    cache = tmp_path / ".cache" / "harness"
    _synth_source(load_profile("tiny"), cache)  # the source is in place; the GGUF is not
    done = _prepare_tiny(tmp_path, limit=200_000)  # the bf16 GGUF is about 360 kB
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1
    assert done.stderr.strip() == "harness model: refused: disk_full"
    assert _leftovers(cache / "models") == []  # no entry, no staging directory


def test_prepare_checks_free_space_before_it_starts(tmp_path: Path) -> None:
    cache = tmp_path / ".cache" / "harness"
    cache.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(cache)], check=True)
    try:
        done = _prepare_tiny(tmp_path)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 1
        assert done.stderr.strip() == "harness model: refused: insufficient_disk_space"
        assert _leftovers(cache / "models") == []
        assert (cache / "sources").is_dir()  # the 0.5 MB source fitted; the check refused
    finally:
        subprocess.run(["umount", str(cache)], check=True)


def test_a_refusal_names_the_file(tmp_path: Path) -> None:
    cache = tmp_path / ".cache" / "harness"
    source, _ = _synth_source(load_profile("tiny"), cache)
    weights = source / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1])
    done = _prepare_tiny(tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "harness model: refused: pin_size_mismatch: size_mismatch (model.safetensors)"
    )


def test_pin_refuses_an_architecture_prepare_would_refuse(tmp_path: Path) -> None:
    """`harness model pin --profile qwen4b` on a Mistral-shaped snapshot: exit 1, the
    category and the file on stderr, and no lock beside the profile."""
    from harness.profiles.lock import lock_path
    from host.model.synth import synthesize_tiny
    from tests.host.model.helpers import edit_json

    lock = lock_path("qwen4b")
    assert not lock.exists()  # an operator's lock must never be clobbered by a test
    snapshot = tmp_path / "mistral"
    synthesize_tiny(snapshot)
    edit_json(
        snapshot / "config.json",
        lambda c: c.update(architectures=["MistralForCausalLM"], model_type="mistral"),
    )
    try:
        done = subprocess.run(
            [*HARNESS, "model", "pin", "--profile", "qwen4b", "--source", str(snapshot)],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO,
        )
        assert done.returncode == 1
        assert done.stderr.strip() == (
            "harness model: pin refused: "
            "config_contradicts_profile: config_architecture_mismatch (config.json)"
        )
        assert not lock.exists()
    finally:
        lock.unlink(missing_ok=True)


def test_pin_refuses_a_stray_symlink_and_says_what_layout_works(tmp_path: Path) -> None:
    from harness.profiles.lock import lock_path
    from host.model.synth import synthesize_tiny

    lock = lock_path("qwen4b")
    assert not lock.exists()
    snapshot = tmp_path / "snapshot"
    synthesize_tiny(snapshot)
    elsewhere = tmp_path / "elsewhere.json"
    (snapshot / "tokenizer_config.json").rename(elsewhere)
    (snapshot / "tokenizer_config.json").symlink_to(elsewhere)
    try:
        done = subprocess.run(
            [*HARNESS, "model", "pin", "--profile", "qwen4b", "--source", str(snapshot)],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1
        assert lines[0] == "harness model: pin refused: symlink_absolute: tokenizer_config.json"
        assert "hf download --local-dir" in lines[1] and "snapshots/REVISION" in lines[1]
        assert not lock.exists()
    finally:
        lock.unlink(missing_ok=True)


def test_prepare_names_a_stray_symlink_and_the_layouts_that_work(tmp_path: Path) -> None:
    cache = tmp_path / ".cache" / "harness"
    source, _ = _synth_source(load_profile("tiny"), cache)
    elsewhere = tmp_path / "elsewhere.json"
    (source / "tokenizer_config.json").rename(elsewhere)
    (source / "tokenizer_config.json").symlink_to(elsewhere)
    done = _prepare_tiny(tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1
    assert lines[0] == (
        "harness model: refused: pin_symlink: symlink_absolute (tokenizer_config.json)"
    )
    assert "snapshots/REVISION" in lines[1]


def test_prepare_pin_needs_a_source_and_a_snapshot_profile(tmp_path: Path) -> None:
    """`--pin` pins an operator's snapshot: without `--source`, or for a profile whose
    model is not a snapshot (tiny is synthesized), it is a usage error (exit 2) and
    nothing is written."""
    for argv in (
        ["--profile", "qwen4b", "--pin"],
        ["--profile", "tiny", "--pin", "--source", str(tmp_path)],
    ):
        done = subprocess.run(
            [*HARNESS, "model", "prepare", *argv],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        assert done.returncode == 2, done.stderr
        assert "--pin needs --source" in done.stderr
    assert not (tmp_path / ".cache").exists()
