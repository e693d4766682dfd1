"""Profiles: the TOML files that declare a trial's model, budgets and policies."""

from harness.profiles.load import ProfileError, list_profiles, load_profile
from harness.profiles.model import Profile

__all__ = ["Profile", "ProfileError", "list_profiles", "load_profile"]
