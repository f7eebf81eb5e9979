"""Re-drive: a remote's dead letters back to its outbox (``POST
/api/remotes/{name}/redrive``, ``ctl redrive REMOTE``).

A message a remote refused waits in ``forward.dead-letter.REMOTE`` with the remote's
error; once the operator fixed the cause (declared the queue, corrected the template,
granted the permission) a re-drive sends every one of them again, to the node it was for
(``TransferService.redrive``). The caller needs read and write on that queue in the
dead-letter vhost, as moving messages out of a queue and into another does.
"""
from __future__ import annotations

from typing import Any

from gateway.auth import User
from gateway.broker import BrokerError

from .access import Action, require_management, require_permission, require_vhost
from .errors import EntityNotFound, from_broker

__all__ = ["redrive"]


def redrive(model: Any, user: User, remote: str) -> dict[str, Any]:
    """Re-drive the dead letters of ``remote``; the answer says how many went back to the
    outbox (``redriven``) and how many stayed because they name no node (``kept``)."""
    forwarding = model.forwarding
    if forwarding is None or not hasattr(forwarding, "redrive"):
        raise EntityNotFound("forwarding is not configured")
    require_management(user)
    vhost, queue = forwarding.dead_letter_queue(remote)
    require_vhost(user, vhost)
    require_permission(user, vhost, Action.READ, queue)
    require_permission(user, vhost, Action.WRITE, queue)
    try:
        moved, kept = forwarding.redrive(remote, model.clock())
    except BrokerError as exc:
        raise from_broker(exc) from None
    return {"remote": remote, "queue": queue, "vhost": vhost, "redriven": moved, "kept": kept}
