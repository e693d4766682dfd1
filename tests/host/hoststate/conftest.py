"""Fixtures: a fake firewall tool and a copy of /proc/net that tests may edit."""

import shutil
import stat
from pathlib import Path

import pytest

from host.hoststate import Sources
from host.hoststate.sockets import SOCKET_FILES

NFT_RULESET = """\
table inet filter {
\tchain input {
\t\ttype filter hook input priority filter; policy accept;
\t\ttcp dport 22 counter packets COUNT bytes BYTES accept comment "ssh  in"
\t}
}
"""


def write_tool(bin_dir: Path, name: str, script: str) -> None:
    """An executable stand-in for a firewall tool (a real subprocess, fixed output)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / name
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_nft_bin(tmp_path: Path) -> Path:
    """A fake `nft` whose counters change on every call (from a counter file)."""
    bin_dir = tmp_path / "fake-bin"
    state = tmp_path / "nft-calls"
    state.write_text("0")
    ruleset = tmp_path / "ruleset.txt"
    ruleset.write_text(NFT_RULESET)
    write_tool(
        bin_dir,
        "nft",
        f"n=$(cat {state}); n=$((n+1)); echo $n > {state}\n"
        f'sed "s/COUNT/$n/; s/BYTES/$((n*60))/" {ruleset}\n',
    )
    return bin_dir


@pytest.fixture
def sources(fake_nft_bin: Path) -> Sources:
    return Sources(firewall_search_path=str(fake_nft_bin))


@pytest.fixture
def proc_net_copy(tmp_path: Path) -> Path:
    """A copy of this host's route and socket tables, for edits a test controls."""
    out = tmp_path / "proc-net-copy"
    out.mkdir()
    for name in ("route", "ipv6_route", *SOCKET_FILES):
        shutil.copyfile(Path("/proc/self/net") / name, out / name)
    return out
