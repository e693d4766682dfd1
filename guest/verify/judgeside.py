"""The judge of a split judgement: pytest and the hidden tests, never the agent's code.

Why: a solution module that, when imported, patches the test runner (one line:
`unittest.TestCase.run = lambda self, result=None: None`) made every unittest-style
hidden test "pass" while the hidden tests ran in the same process as the solution.
Here the process that runs pytest and the hidden tests never imports a module of the
agent's workspace: a module of the task's original workspace (the stub's top-level names,
guest/verify/stubs.py) that the judge cannot find on its own path is served by a second
process, the agent's (guest/verify/agentside.py), through an import hook at the end of
`sys.meta_path`, installed only when pytest starts collecting (after the judge's own
imports), and serving no other name.

The solution computes, the judge decides: what crosses, and which decisions stay here,
is guest/verify/wire.py (values by copy), guest/verify/link.py (the wire's judge end)
and guest/verify/proxies.py (the solution's objects and the judge's rules for them).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import socket
import struct
import sys
import types
from pathlib import Path

import guest.verify.link as link_module
from guest.verify.link import Link, SplitJudgeError
from guest.verify.proxies import RemoteModule, SolutionHandles
from guest.verify.stubs import read_stubs

ACCEPT_SECONDS = 60.0
_UCRED = struct.Struct("3i")

__all__ = ["Link", "SolutionFinder", "SplitJudgeError", "accept", "main"]


def _handles() -> SolutionHandles:
    handles = link_module.LINK.handles
    if not isinstance(handles, SolutionHandles):
        raise SplitJudgeError("no solution is served")
    return handles


class SolutionLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return RemoteModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        handles = _handles()
        handles.imported.add(module.__name__)
        try:
            served = link_module.LINK.request(["import", module.__name__])
        except SplitJudgeError as exc:  # pytest's optional imports expect an ImportError
            raise ImportError(module.__name__) from exc
        if not isinstance(served, RemoteModule):
            raise SplitJudgeError("the solution's process did not serve a module")
        module.__dict__["_harness_ref"] = served.__dict__["_harness_ref"]
        handles.proxies[served.__dict__["_harness_ref"]] = module
        if hasattr(served, "__path__"):
            module.__path__ = []


class SolutionFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: only a name no finder of the judge's own could find, and
    only a module of the task's original workspace (or a submodule of one served)."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        parent = fullname.rpartition(".")[0]
        if parent and not isinstance(sys.modules.get(parent), RemoteModule):
            return None
        if fullname.partition(".")[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, SolutionLoader())


class ServeWhenCollecting:
    """A pytest plugin: the import hook goes in when collection starts, after pytest and
    its plugins have made their own imports (and their optional probes) without it."""

    def __init__(self, finder: SolutionFinder) -> None:
        self.finder = finder

    def pytest_collection(self) -> None:
        if self.finder not in sys.meta_path:
            sys.meta_path.append(self.finder)


def accept(listener: socket.socket, peer_uid: int, timeout: float) -> socket.socket | None:
    """The solution's process, and only if it runs as `peer_uid`."""
    listener.settimeout(timeout)
    try:
        conn, _ = listener.accept()
    except OSError:
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    _pid, uid, _gid = _UCRED.unpack(creds)
    if uid != peer_uid:
        conn.close()
        return None
    conn.settimeout(None)
    return conn


def main(argv: list[str]) -> int:
    """ROOT SOCKET PEER_UID STUBS -- PYTEST_ARGS: run pytest with the solution served."""
    root, path, peer_uid, stubs = argv[:4]
    if argv[4] != "--":
        return 4
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o666)
    listener.listen(1)
    sock = accept(listener, int(peer_uid), ACCEPT_SECONDS)
    listener.close()
    known = read_stubs(Path(stubs))
    link_module.LINK = Link(sock, SolutionHandles(known))
    sys.path[:] = [entry for entry in sys.path if entry != root]
    import pytest

    plugin = ServeWhenCollecting(SolutionFinder(known.modules))
    return int(pytest.main(argv[5:], plugins=[plugin]))
