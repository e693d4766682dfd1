"""libvirt connections and the facts read through them (one home for `import libvirt`).

Why a module of its own: the libvirt backend, `harness gc` and `harness doctor` all
talk to `qemu:///system`, and each must tell "the domain is gone" (VIR_ERR_NO_DOMAIN)
from "libvirt did not answer" (docs/engineering.md §2) the same way. libvirt-python prints
every error to stderr by default; the handler installed here keeps it quiet, since
the caller turns each error into a closed category.
"""

from __future__ import annotations

import contextlib
from typing import Any, Literal

import libvirt

from host.vm.tags import NAME_PREFIX

URI = "qemu:///system"
DomainState = Literal["present", "absent", "unread"]


def _quiet(_ctx: object, _err: object) -> None:
    """libvirt's error callback: errors arrive as exceptions; print nothing."""


libvirt.registerErrorHandler(_quiet, None)


class VirtError(Exception):
    """libvirt could not be reached or refused a call."""


def open_connection() -> Any:
    """A read-write connection to qemu:///system (VirtError if none)."""
    try:
        return libvirt.open(URI)
    except libvirt.libvirtError:
        raise VirtError from None


def domain_state(conn: Any, name: str) -> DomainState:
    """Whether a domain of this name exists, read from libvirt itself."""
    try:
        conn.lookupByName(name)
    except libvirt.libvirtError as exc:
        return "absent" if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN else "unread"
    return "present"


def harness_domain_names(conn: Any) -> list[str]:
    """Names of the domains (running or defined) that carry the harness prefix."""
    try:
        domains = conn.listAllDomains(0)
    except libvirt.libvirtError:
        raise VirtError from None
    return sorted(d.name() for d in domains if d.name().startswith(NAME_PREFIX))


def destroy_by_name(conn: Any, name: str) -> DomainState:
    """Destroy (and undefine, if persistent) a domain; its state read afterwards."""
    with contextlib.suppress(libvirt.libvirtError):  # the read below is the evidence
        domain = conn.lookupByName(name)
        if domain.isActive():
            domain.destroy()
        if domain.isPersistent():
            domain.undefine()
    return domain_state(conn, name)
