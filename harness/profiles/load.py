"""Load a profile from profiles/NAME.toml with one-line errors that name the key."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import ValidationError

from harness.profiles.model import Profile

PROFILES_DIR = Path(__file__).resolve().parents[2] / "profiles"


class ProfileError(ValueError):
    """An invalid or missing profile; the message is one line naming the key."""


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def first_error_line(profile: str, error: ValidationError) -> str:
    detail = error.errors(include_url=False, include_input=False)[0]
    message = str(detail["msg"]).removeprefix("Value error, ")
    return f"profile {profile}: {_location(detail['loc'])}: {message}"


def load_profile(name: str, directory: Path = PROFILES_DIR) -> Profile:
    path = directory / f"{name}.toml"
    if "/" in name or not path.is_file():
        known = ", ".join(list_profiles(directory)) or "none"
        raise ProfileError(f"profile {name}: not found (known: {known})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {name}: not valid TOML ({exc})") from exc
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(first_error_line(name, exc)) from exc
    if profile.name != name:
        raise ProfileError(f"profile {name}: name: must equal the file name ({name!r})")
    return profile


def list_profiles(directory: Path = PROFILES_DIR) -> list[str]:
    return sorted(path.stem for path in directory.glob("*.toml"))
