"""Firewall ruleset: `nft list ruleset`, else `iptables-save`, normalised and raw.

The normalised form drops what changes without anyone changing the rules: packet and
byte counters (`counter packets N bytes M`, `[N:M]`), `#` comment lines (iptables-save
stamps the time), and whitespace runs outside quoted strings (a rule's quoted comment
is kept exactly). Rule order is kept: it decides the verdict. The digest of the raw
bytes is recorded apart, so a reviewer can see that the bytes differed even when the
normalised rules did not. No tool, a failing tool or a timeout is `unread`: the
absence of the instrument says nothing about the rules.
"""

import hashlib
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from host.hoststate.categories import FirewallTool
from host.hoststate.facet import CanonicalValue, FacetRead

_NFT_COUNTER = re.compile(r"\bcounter packets \d+ bytes \d+")
_IPT_COUNTER = re.compile(r"\[\d+:\d+\]")
_QUOTED_OR_SPACE = re.compile(r'"(?:[^"\\]|\\.)*"|\s+')
MAX_OUTPUT = 16 << 20


@dataclass(frozen=True)
class FirewallCommand:
    """One way to dump the ruleset: the tool category and its arguments."""

    tool: FirewallTool
    program: str
    args: tuple[str, ...]


DEFAULT_COMMANDS: tuple[FirewallCommand, ...] = (
    FirewallCommand("nft", "nft", ("list", "ruleset")),
    FirewallCommand("iptables_save", "iptables-save", ()),
)


def _squeeze(line: str) -> str:
    return _QUOTED_OR_SPACE.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", line)


def normalise(tool: FirewallTool, text: str) -> list[str]:
    """The ruleset as lines that differ only when the rules differ."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        counters = _NFT_COUNTER if tool == "nft" else _IPT_COUNTER
        line = counters.sub("counter" if tool == "nft" else "", line)
        line = _squeeze(line).strip()
        if line:
            out.append(line)
    return out


def read_firewall(
    commands: Sequence[FirewallCommand] = DEFAULT_COMMANDS,
    *,
    search_path: str | None = None,
    timeout_s: float = 10.0,
) -> FacetRead:
    """Dump the ruleset with the first tool found on `search_path` (PATH if None)."""
    for command in commands:
        program = shutil.which(command.program, path=search_path)
        if program is None:
            continue
        try:
            done = subprocess.run(
                [program, *command.args],
                capture_output=True,
                timeout=timeout_s,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return FacetRead("unread", reason="tool_timeout", tool=command.tool)
        except OSError:
            return FacetRead("unread", reason="tool_failed", tool=command.tool)
        if done.returncode != 0 or len(done.stdout) > MAX_OUTPUT:
            return FacetRead("unread", reason="tool_failed", tool=command.tool)
        try:
            text = done.stdout.decode("utf-8")
        except UnicodeDecodeError:
            return FacetRead("unread", reason="parse_failed", tool=command.tool)
        lines = normalise(command.tool, text)
        canonical: CanonicalValue = {"tool": command.tool, "rules": list(lines)}
        return FacetRead(
            "present",
            canonical=canonical,
            count=len(lines),
            tool=command.tool,
            raw_sha256=hashlib.sha256(done.stdout).hexdigest(),
        )
    return FacetRead("unread", reason="tool_missing")
