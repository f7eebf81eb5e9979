"""The per-message rules of links whose route is ``amqp$transfer`` or one of its aliases.

- A link to ``node@container`` (a ``Forward`` route) carries messages for that address
  only: a message whose ``to`` is another address is rejected with
  ``amqp:precondition-failed`` naming both; one without ``to`` goes as if it had the
  link's address (the forwarder writes it into the forwarded copy).
- A link to ``amqp$transfer`` itself reads each message's ``to`` (required) and resolves
  it like the anonymous relay: a container that is this gateway delivers locally, another
  one forwards. A message another gateway forwarded (it carries the forwarding
  annotations) is dropped as a duplicate when its (origin container, gateway id) is in
  the dedupe window: accepted, not routed again.

Only these routes come here; a local publish route never does (one class check in
``links``).
"""
from __future__ import annotations

from typing import Any, Optional

from addressing import AddressError, AddressErrorKind, Forward, ServiceRoute, TRANSFER_SERVICE
from addressing import resolve_target
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition as Cond
from gateway.broker.message import ReceivedAnnotations
from gateway.forward.annotations import Forwarded, ForwardedPrefix, annotations_section, forwarded_in
from translators.amqp10_sections import Amqp10Summary
from translators.errors import TranslationError

__all__ = ["DUPLICATE", "transfer_route", "global_address"]

#: the route of a duplicate: accept it and do nothing else
DUPLICATE = object()


def global_address(route: Forward) -> str:
    return f"{route.node}@{route.container}"


def transfer_route(host: Any, directory: Any, route: Any, link_address: Optional[str],
                   summary: Amqp10Summary, encoded: bytes,
                   known: Optional[tuple[ReceivedAnnotations, Optional[Forwarded]]] = None,
                   prefix: Optional[ForwardedPrefix] = None, transfer: Any = None
                   ) -> tuple[Any, Optional[ReceivedAnnotations], Optional[Forwarded]]:
    """The route of one message on a link whose route is ``route`` (a ``Forward`` or a
    ``ServiceRoute``), and, for a forwarded message, its message-annotations section as
    decoded here, once (for the container's ``received_annotations``), and the identity
    ``forwarded_in`` read from it (to remember once it is taken in; read once per
    message): ``known`` (the two) when the link's ``prefix`` read it already, else decoded
    here and taught to ``prefix``. ``transfer``: the ``amqp$transfer`` node when the caller holds
    it (else looked up). Raises ``AddressError`` / ``Amqp10Error`` to reject it."""
    if route.__class__ is Forward:
        to = summary.to
        if to is not None and to != link_address:
            raise Amqp10Error(Cond.PRECONDITION_FAILED,
                              f"message 'to' is '{to}', but this link only carries messages "
                              f"for '{link_address}'")
        return route, None, None
    if route.__class__ is not ServiceRoute or route.name != TRANSFER_SERVICE:
        return route, None, None
    if summary.to is None:
        raise AddressError(AddressErrorKind.INVALID,
                           f"{TRANSFER_SERVICE}: the message has no 'to' address")
    if known is not None:
        section, forwarded = known
    else:
        try:
            section = annotations_section(encoded)
        except TranslationError as exc:
            raise Amqp10Error(Cond.DECODE_ERROR, f"malformed message: {exc}") from None
        if section is not None and prefix is not None:
            section = prefix.learn(encoded, summary, section)
        forwarded = None if section is None else forwarded_in(section.annotations)
    if forwarded is not None:
        if transfer is None:
            transfer = host.vhost.service(TRANSFER_SERVICE)
        if transfer.dedupe.duplicate(forwarded.origin, forwarded.gateway_id):
            return DUPLICATE, None, None
    resolved = resolve_target(summary.to, our_container=host.container_id, directory=directory,
                              subject=summary.subject, vhost=host.vhost.name)
    if resolved.__class__ is ServiceRoute and resolved.name == TRANSFER_SERVICE:
        raise AddressError(AddressErrorKind.INVALID,
                           f"{TRANSFER_SERVICE}: 'to' must name a node, not '{summary.to}'")
    if forwarded is None:
        return resolved, None, None
    return resolved, section, forwarded
