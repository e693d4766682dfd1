"""Validation of cgroup names.

Names become directory names under a hierarchy the harness writes into as root, so
they are restricted to identifiers: no separators, no `.`/`..`, nothing a shell or a
path join could reinterpret. Leftovers are later found by name prefix (`harness gc`),
so prefixes follow the same alphabet.
"""

import re

from host.cgroups.errors import CgroupError

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_PREFIX = re.compile(r"[a-z0-9_-]{0,64}")


def validate_name(name: str) -> str:
    """Return `name` if it is a valid cgroup identifier, else raise `invalid_name`."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise CgroupError("invalid_name")
    return name


def validate_prefix(prefix: str) -> str:
    """Return `prefix` if it can only match valid names, else raise `invalid_name`."""
    if not isinstance(prefix, str) or _PREFIX.fullmatch(prefix) is None:
        raise CgroupError("invalid_name")
    return prefix
