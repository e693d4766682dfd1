"""Profiles load into the model; every invalid profile gets one line naming the key."""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.profiles import ProfileError, list_profiles, load_profile
from harness.profiles.load import PROFILES_DIR
from harness.profiles.model import Profile
from harness.profiles.sizes import format_size, parse_size


def _qwen4b() -> dict[str, Any]:
    return tomllib.loads((PROFILES_DIR / "qwen4b.toml").read_text())


def _dump(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def _to_toml(data: dict[str, Any]) -> str:
    """Enough TOML writing for profile-shaped data (tables of scalars, arrays of tables)."""
    lines = [f"{k} = {_dump(v)}" for k, v in data.items() if not isinstance(v, dict | list)]
    for section, values in data.items():
        if not isinstance(values, dict):
            continue
        lines.append(f"[{section}]")
        lines += [f"{k} = {_dump(v)}" for k, v in values.items() if not isinstance(v, dict | list)]
        for key, sub in values.items():
            if isinstance(sub, dict):
                lines.append(f"[{section}.{key}]")
                lines += [f"{k} = {_dump(v)}" for k, v in sub.items()]
            elif isinstance(sub, list):
                for item in sub:
                    lines.append(f"[[{section}.{key}]]")
                    lines += [f"{k} = {_dump(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"


def _load_variant(tmp_path: Path, data: dict[str, Any]) -> None:
    (tmp_path / "qwen4b.toml").write_text(_to_toml(data))
    load_profile("qwen4b", tmp_path)


@pytest.mark.parametrize("name", ["qwen4b", "smollm2", "tiny", "qwen-coder"])
def test_shipped_profiles_load(name: str) -> None:
    assert load_profile(name).name == name


def test_qwen4b_budgets_are_the_designs() -> None:
    profile = load_profile("qwen4b")
    gib = 1 << 30
    assert profile.model.outtype == "bf16"
    assert profile.model.backend == "llama_cpp_bf16_v1"
    assert profile.model.output_constraint == "qwen_tagged_tool_json_v1"
    assert profile.inference.threads == 2
    assert profile.inference.request_deadline_s == 600
    memory = profile.memory
    # measured, docs/qwen4b-memory.md: the worker on the host, the guest for the agent
    assert profile.worker.placement == "host"
    assert (memory.guest_ram, memory.qemu_cgroup_limit, memory.host_admission_floor) == (
        2 * gib,
        3 * gib,
        15 * gib,
    )
    assert memory.worker_cgroup_limit == 12 * gib
    assert memory.model_working_set == 11_520 << 20
    assert memory.request_admission_floor == 512 << 20
    assert memory.runtime_guard == 256 << 20
    assert (profile.provisioning.disk, profile.provisioning.deadline_s) == (20 * gib, 1800)
    assert (profile.vm.deadline_s, profile.vm.ssh_deadline_s) == (7200, 6600)


def test_round_trip_writer_is_faithful(tmp_path: Path) -> None:
    _load_variant(tmp_path, _qwen4b())


def _set(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    *path, last = dotted.split(".")
    target = data
    for part in path:
        target = target[part]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return data


_DELETE = object()


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("memory.guest_ram", "12G", "memory.guest_ram: expected a size"),
        ("memory.guest_ram", "-1 GiB", "memory.guest_ram: expected a size"),
        (
            "memory.qemu_cgroup_limit",
            "2 GiB",
            "memory.qemu_cgroup_limit must be at least memory.guest_ram + vm.tcg_tb_size_mib",
        ),
        (
            "memory.host_admission_floor",
            "2 GiB",
            "memory.host_admission_floor must be at least memory.qemu_cgroup_limit",
        ),
        (
            "memory.runtime_guard",
            "11 GiB",
            "memory.runtime_guard must not exceed memory.request_admission_floor",
        ),
        ("memory.model_working_set", _DELETE, "memory.model_working_set: Field required"),
        ("memory.swap", "0 B", "memory.swap: Extra inputs are not permitted"),
        ("inference.threads", 0, "inference.threads: Input should be greater than or equal to 1"),
        ("inference.threads", "two", "inference.threads: Input should be a valid integer"),
        ("inference.max_tokens", 16384, "inference.max_tokens must be below"),
        ("vm.ssh_deadline_s", 9000, "vm: deadlines must nest"),
        ("vm.deadline_s", _DELETE, "vm.deadline_s: Field required"),
        (
            "worker.placement",
            "cloud",
            "worker.placement: Input should be 'auto', 'guest' or 'host'",
        ),
        ("model.source", "hub", "model.source: Input should be"),
        ("model.pins", [{"path": "a", "size": 1, "sha256": "0" * 64}], "hf_snapshot pins belong"),
        ("model.wheel", {"requirement": "x==1"}, "model.wheel."),
        ("model.outtype", "none", "a checkpoint source needs a conversion outtype"),
        ("model.architecture", "qwen2", "the converter has no qwen2"),
        ("agent.default_task", "../etc", "agent.default_task: String should match pattern"),
        ("agent.wall_deadline_s", 8000, "agent.wall_deadline_s cannot exceed vm.deadline_s"),
        ("agent.approvals", "ask_user", "agent.approvals: Input should be"),
        ("name", "other", "name: must equal the file name"),
    ],
)
def test_invalid_profile_is_one_line_naming_the_key(
    tmp_path: Path, key: str, value: Any, expected: str
) -> None:
    with pytest.raises(ProfileError) as info:
        _load_variant(tmp_path, _set(_qwen4b(), key, value))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("profile qwen4b: ")
    assert expected in message


def test_placement_guest_needs_worker_below_guest_ram(tmp_path: Path) -> None:
    data = _set(_qwen4b(), "worker.placement", "guest")
    expected = re.escape("memory.worker_cgroup_limit must be below memory.guest_ram")
    with pytest.raises(ProfileError, match=expected):
        _load_variant(tmp_path, data)


@pytest.mark.parametrize(
    ("path", "ok"),
    [
        ("model.safetensors", True),
        ("a/b.json", True),
        ("../x", False),
        ("/etc/passwd", False),
        ("a//b", False),
        ("./a", False),
    ],
)
def test_pin_paths_stay_relative(path: str, ok: bool) -> None:
    from pydantic import ValidationError

    from harness.profiles.model import FilePin

    if ok:
        FilePin(path=path, size=1, sha256="0" * 64)
    else:
        with pytest.raises(ValidationError):
            FilePin(path=path, size=1, sha256="0" * 64)


def test_unknown_and_malformed_profiles(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"profile nope: not found \(known: "):
        load_profile("nope")
    (tmp_path / "bad.toml").write_text("name = [")
    with pytest.raises(ProfileError, match="profile bad: not valid TOML"):
        load_profile("bad", tmp_path)
    assert list_profiles(tmp_path) == ["bad"]


def test_sizes() -> None:
    assert parse_size("12 GiB") == 12 << 30
    assert parse_size("512MiB") == 512 << 20
    assert parse_size(7) == 7
    assert format_size(11_274_289_152) == "10752 MiB"
    assert format_size(1000) == "1,000 B"


def test_profile_names_cannot_reach_outside_the_directory() -> None:
    with pytest.raises(ProfileError, match="not found"):
        load_profile("../profiles/qwen4b")


def test_tiny_pins_equal_what_synth_writes(tmp_path: Path) -> None:
    """The tiny profile pins the bytes `harness model synth tiny` writes on any machine."""
    import hashlib

    from host.model.synth import synthesize_tiny

    synthesize_tiny(tmp_path)
    pins = load_profile("tiny").model.pins
    written = {
        p.name: (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in tmp_path.iterdir()
    }
    assert written == {pin.path: (pin.size, pin.sha256) for pin in pins}


def _qwen_coder_model(change: Callable[[dict[str, Any]], None]) -> None:
    data = tomllib.loads((PROFILES_DIR / "qwen-coder.toml").read_text())
    change(data["model"])
    Profile.model_validate(data)


def _drop_a_part(model: dict[str, Any]) -> None:
    del model["wheels"]["parts"][3]


def _repeat_a_wheel(model: dict[str, Any]) -> None:
    parts = model["wheels"]["parts"]
    parts[1] = {**parts[0], "member_size": parts[1]["member_size"]}  # sizes still add up


def _also_one_wheel(model: dict[str, Any]) -> None:
    model["wheel"] = dict(model["wheels"]["parts"][0])


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_drop_a_part, "do not add up to the model's size"),
        (_repeat_a_wheel, "a wheel is listed twice"),
        (_also_one_wheel, "needs one of [model.wheel] or [model.wheels]"),
    ],
)
def test_a_model_over_several_wheels_is_pinned_whole(
    change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    with pytest.raises(ValidationError) as info:
        _qwen_coder_model(change)
    assert expected in str(info.value)
