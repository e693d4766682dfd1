"""Trial tags and the names derived from them.

Why: a SIGKILLed orchestrator leaves a QEMU process, a scratch directory and a port
behind; `harness gc` finds them by name. Every resource this package creates carries
`harness-vm-<tag>`: the QEMU command line (`-name guest=...`), the scratch directory
name, and the guest's kernel command line. Tags are lower-case hex so a name cannot
smuggle a path separator, a comma (QEMU's option separator) or a shell character.
"""

import re

_TAG = re.compile(r"[0-9a-f]{8,32}")
NAME_PREFIX = "harness-vm-"


def validate_tag(tag: str) -> str:
    if not isinstance(tag, str) or _TAG.fullmatch(tag) is None:
        raise ValueError("a trial tag is 8-32 lower-case hex digits")
    return tag


def resource_name(tag: str) -> str:
    """`harness-vm-<tag>`: what gc searches for in command lines and directory names."""
    return NAME_PREFIX + validate_tag(tag)
