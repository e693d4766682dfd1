"""Resources a trial owns, released in reverse order, one cleanup receipt each.

Each resource registers its release when it is acquired, under its closed resource
name (the cleanup record's `Resource`), so `release_early` cannot miss it by a typo.
A registration goes through its owner (`OwnedResources.owner`), which accepts only the
resources that owner declares in receipts/ownership.py, the table the audit requires
cleanup receipts from: a resource registered outside its owner's declaration is
`UndeclaredResource`, a defect of ours, before anything is acquired under it. Release
never raises: a release that fails says `failed` with its evidence, and the ones after
it still run. The receipts come out in release order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from host.cgroups import Cgroup
from host.release import CleanupResult, release_cgroup
from receipts.records.cleanup import Resource

Release = Callable[[], Awaitable[tuple[CleanupResult, ...]]]


class UndeclaredResource(Exception):
    """A registration of a resource its owner does not declare (receipts/ownership.py)."""


class OwnedResources:
    def __init__(self) -> None:
        self._releases: list[tuple[Resource, Release, Owner]] = []
        self._released: list[CleanupResult] = []

    def owner(self, declared: tuple[Resource, ...]) -> Owner:
        """Where one owner (the trial, a guest, the worker) registers its releases."""
        return Owner(self, frozenset(declared))

    def _register(self, resource: Resource, release: Release, owner: Owner) -> None:
        self._releases.append((resource, release, owner))

    async def _run(self, resource: Resource, release: Release) -> None:
        started = time.monotonic()
        try:
            self._released.extend(await release())
        except Exception:  # noqa: BLE001 - a failed release is evidence, not a crash
            elapsed = int((time.monotonic() - started) * 1000)
            self._released.append(CleanupResult(resource, "failed", "unread", elapsed))

    async def release_early(self, resource: Resource, owner: Owner | None = None) -> None:
        """Release the latest registration of `resource` now (e.g. the worker, which must
        stop before verification), by `owner` when given (two guests each register a
        `qemu_process`); its receipts keep their place in release order."""
        for position in range(len(self._releases) - 1, -1, -1):
            name, _release, registrant = self._releases[position]
            if name == resource and owner in (None, registrant):
                release = asyncio.ensure_future(self._run(*self._releases.pop(position)[:2]))
                try:
                    await asyncio.shield(release)
                except asyncio.CancelledError:
                    # A stop signal during the release: it was taken off the list, so it
                    # must finish here, or the resource would leak with no receipt.
                    await release
                    raise
                return

    async def release_all(self) -> list[CleanupResult]:
        while self._releases:
            await self._run(*self._releases.pop()[:2])
        return list(self._released)


class Owner:
    """One owner's registrations: only the resources it declares."""

    def __init__(self, resources: OwnedResources, declared: frozenset[Resource]) -> None:
        self._resources = resources
        self.declared = declared

    def register(self, resource: Resource, release: Release) -> None:
        if resource not in self.declared:
            raise UndeclaredResource(resource)
        self._resources._register(resource, release, self)

    async def release_early(self, resource: Resource) -> None:
        """Release this owner's latest registration of `resource` now."""
        await self._resources.release_early(resource, self)


def cgroup_release(cgroup: Cgroup) -> Release:
    """Kill what is left in `cgroup`, remove it and read that it is gone (in a thread)."""

    async def release() -> tuple[CleanupResult, ...]:
        return (await asyncio.to_thread(release_cgroup, cgroup),)

    return release
