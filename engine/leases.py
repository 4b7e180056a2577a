"""Who holds a run, judged from its stored owner: :func:`owner_gone` (the lease is free to
take) and :func:`orphaned` (nobody executes a run that should be executing). Shared by the
run service (claims, cancels, watchers) and the recovery loop (:mod:`engine.recovery`).
"""

from __future__ import annotations

import os
import socket
import time

from schemas.records import OwnerInfo, RunSummary
from schemas.types import RunStatus

__all__ = ["orphaned", "owner_gone"]


def owner_gone(owner: OwnerInfo | None) -> bool:
    """True when nobody holds the run: no owner, an expired lease, or an owner process of
    this host that no longer exists."""
    if owner is None or owner.lease_until < time.time():
        return True
    if owner.host != socket.gethostname() or owner.pid <= 0:
        return False
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def orphaned(summary: RunSummary, *, now: float, pending_grace_s: float) -> bool:
    """True for a run nobody executes and that should be executing: ``running`` with its
    owner gone (:func:`owner_gone`); ``pending`` with an owner that is gone (claimed, then
    the process died before the first checkpoint); or ``pending``, never claimed and
    created more than ``pending_grace_s`` seconds before ``now`` (a process that prepares
    a run claims it within milliseconds, so one left that long was accepted by a process
    that died before executing it; a queue may legitimately hold it longer, which the
    queued recovery checks). Paused and ended runs never are."""
    if summary.status is RunStatus.running:
        return owner_gone(summary.owner)
    if summary.status is not RunStatus.pending:
        return False
    if summary.owner is not None:
        return owner_gone(summary.owner)
    return summary.created_at < now - pending_grace_s
