"""A private apt instance over exactly the image's Debian sources.

Why: the image key must name the package versions the image will contain, and those
versions must come from the same sources mmdebstrap installs from, not from whatever
the host's apt is configured with (this host also lists a NodeSource repository whose
`nodejs` would shadow Debian's). So resolution, the kernel download and the busybox
download all go through an apt whose sources list, state and cache live in a
directory of ours; the host's apt configuration is never read or written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from host.image.categories import BuildStep, ImageFailure
from host.image.errors import ImageError
from host.image.tools import run_tool

DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9.+-]{1,127}$")
_VERSION = re.compile(r"^[0-9A-Za-z.+~:-]{1,128}$")


def valid_package(name: str) -> str:
    if _PACKAGE.fullmatch(name) is None:
        raise ImageError("build_failed", "resolve")
    return name


def valid_version(version: str) -> str:
    if _VERSION.fullmatch(version) is None:
        raise ImageError("build_failed", "resolve")
    return version


@dataclass(frozen=True)
class AptSource:
    """One `deb` line: mirror URI, suite, components (signed by the Debian keyring)."""

    uri: str
    suite: str
    components: tuple[str, ...] = ("main",)

    def one_line(self, signed_by: bool) -> str:
        opts = f"[signed-by={DEBIAN_KEYRING}] " if signed_by else ""
        return f"deb {opts}{self.uri} {self.suite} {' '.join(self.components)}"

    def as_json(self) -> dict[str, object]:
        return {"uri": self.uri, "suite": self.suite, "components": list(self.components)}


def bookworm_sources() -> tuple[AptSource, ...]:
    """Debian 12: main, updates and security (the image gets security fixes)."""
    return (
        AptSource("http://deb.debian.org/debian", "bookworm"),
        AptSource("http://deb.debian.org/debian", "bookworm-updates"),
        AptSource("http://deb.debian.org/debian-security", "bookworm-security"),
    )


class PrivateApt:
    """apt-get / apt-cache confined to `state_dir` and the given sources."""

    def __init__(self, state_dir: Path, sources: tuple[AptSource, ...]) -> None:
        self.state_dir = state_dir
        self.sources = sources
        etc = state_dir / "etc"
        for sub in (
            "etc/apt.conf.d",
            "etc/preferences.d",
            "etc/sources.list.d",
            "lists/partial",
            "cache/archives/partial",
        ):
            (state_dir / sub).mkdir(parents=True, exist_ok=True)
        (etc / "sources.list").write_text(
            "".join(s.one_line(signed_by=True) + "\n" for s in sources), encoding="utf-8"
        )
        status = state_dir / "status"
        if not status.exists():
            status.write_bytes(b"")

    def options(self) -> list[str]:
        d = self.state_dir
        pairs = {
            "Dir::Etc::SourceList": d / "etc" / "sources.list",
            "Dir::Etc::SourceParts": d / "etc" / "sources.list.d",
            "Dir::Etc::Parts": d / "etc" / "apt.conf.d",
            "Dir::Etc::Preferences": "/dev/null",
            "Dir::Etc::PreferencesParts": d / "etc" / "preferences.d",
            "Dir::State::Lists": d / "lists",
            "Dir::State::status": d / "status",
            "Dir::Cache": d / "cache",
            "Debug::NoLocking": "1",
            "APT::Architecture": "amd64",
            "APT::Architectures": "amd64",
            "APT::Sandbox::User": "root",
            "Acquire::Retries": "3",
        }
        out: list[str] = []
        for key, value in pairs.items():
            out += ["-o", f"{key}={value}"]
        return out

    def _run(
        self,
        tool: str,
        args: list[str],
        category: ImageFailure,
        step: BuildStep,
        cwd: Path | None = None,
    ) -> str:
        return run_tool(
            [tool, "-q", *self.options(), *args],
            category=category,
            step=step,
            cwd=cwd,
            timeout_s=600.0,
        )

    def update(self) -> None:
        """Fetch the sources' indexes (the network). `--error-on=any`: apt otherwise exits
        0 when a fetch fails and quietly resolves from older lists, or from none."""
        self._run("apt-get", ["update", "--error-on=any"], "fetch_failed", "resolve")

    def candidate_versions(self, packages: list[str]) -> dict[str, str]:
        """The version apt would install for each package; refuse a package with none."""
        for name in packages:
            valid_package(name)
        text = self._run("apt-cache", ["policy", *packages], "build_failed", "resolve")
        return parse_policy(text, packages)

    def depends(self, package: str) -> list[str]:
        """The `Depends:` targets of `package` (virtual alternatives excluded)."""
        text = self._run(
            "apt-cache", ["depends", valid_package(package)], "kernel_unavailable", "resolve"
        )
        return parse_depends(text)

    def download(self, package: str, version: str, dest: Path, category: ImageFailure) -> Path:
        """Download `package=version` into `dest`; return the .deb (exactly one)."""
        before = set(dest.glob("*.deb"))
        self._run(
            "apt-get",
            ["download", f"{valid_package(package)}={valid_version(version)}"],
            category,
            "kernel",
            cwd=dest,
        )
        new = sorted(set(dest.glob("*.deb")) - before)
        if len(new) != 1:
            raise ImageError(category, "kernel")
        return new[0]


def parse_policy(text: str, packages: list[str]) -> dict[str, str]:
    """Parse `apt-cache policy` output into {package: candidate}; every one required."""
    found: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            current = line[:-1]
            continue
        stripped = line.strip()
        if current is not None and stripped.startswith("Candidate:"):
            candidate = stripped.split(":", 1)[1].strip()
            if candidate and candidate != "(none)":
                found[current] = valid_version(candidate)
    missing = [p for p in packages if p not in found]
    if missing:
        raise ImageError("build_failed", "resolve")
    return {p: found[p] for p in packages}


def parse_depends(text: str) -> list[str]:
    """Direct `Depends:` of the first package in `apt-cache depends` output."""
    deps: list[str] = []
    for line in text.splitlines():
        stripped = line.strip().lstrip("|")
        if stripped.startswith("Depends:"):
            target = stripped.split(":", 1)[1].strip()
            if not target.startswith("<"):
                deps.append(target)
    return deps
