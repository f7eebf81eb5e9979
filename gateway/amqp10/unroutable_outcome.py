"""The outcome of an unroutable 1.0 publish, and the target capabilities that choose it.

A message that no queue takes (``/exchange/X/RK``, ``/exchange/X`` with its subject,
``/topic/RK``, ``/queue`` with its subject, or the anonymous relay with such a ``to``)
is settled by the link's :class:`~gateway.broker.unroutable.UnroutablePolicy`:

* the operator's default, ``amqp10.unroutable`` (``accept`` unless configured: proton's
  ``BlockingSender.send`` raises on ``released``, so a fire-and-forget publisher whose
  topic has no subscriber yet would crash; RabbitMQ 3's 1.0 plugin and a non-mandatory
  0-9-1 publish drop the message too);
* or what the link's target asks for with Qpid Broker-J's capabilities (QPID-7188):
  ``DISCARD_UNROUTABLE`` (accept and drop) or ``REJECT_UNROUTABLE`` (``rejected``).
  Broker-J spells the symbols so; their lower-case hyphenated forms
  (``discard-unroutable``, ``reject-unroutable``) are taken too. Asking for both is an
  ``amqp:invalid-field`` refusal of the attach. The attach reply's target carries back
  the capability (as the client spelled it) the link honours; others are ignored.

``rejected`` carries ``amqp:not-found``, Broker-J's condition for it (a Qpid user
matches on that), with a text naming the exchange, the vhost and the routing key.
A message the client sent pre-settled is dropped whatever the policy: it hears no
outcome. Counted in ``broker.unroutable`` (dropped or returned, as RabbitMQ counts them).
"""
from __future__ import annotations

from typing import Iterable, Optional

from proton import Condition, Data, Delivery, Terminus

from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.broker.unroutable import UnroutableCounts, UnroutablePolicy
from gateway.broker.vhost import VirtualHost

__all__ = [
    "DISCARD_UNROUTABLE",
    "REJECT_UNROUTABLE",
    "TARGET_CAPABILITIES",
    "UNROUTABLE_RELEASED",
    "link_policy",
    "capability_symbols",
    "echo_capabilities",
    "settle_unroutable",
    "unroutable_text",
]

#: Broker-J's target capability symbols (its ``Symbols`` class)
DISCARD_UNROUTABLE = "DISCARD_UNROUTABLE"
REJECT_UNROUTABLE = "REJECT_UNROUTABLE"

#: target capability -> the policy it asks for
TARGET_CAPABILITIES: dict[str, UnroutablePolicy] = {
    DISCARD_UNROUTABLE: UnroutablePolicy.ACCEPT,
    "discard-unroutable": UnroutablePolicy.ACCEPT,
    REJECT_UNROUTABLE: UnroutablePolicy.REJECT,
    "reject-unroutable": UnroutablePolicy.REJECT,
}

#: the ledger's ``reason`` of an unroutable message settled ``released``
UNROUTABLE_RELEASED = "released"


def capability_symbols(data: Data) -> list[str]:
    """The symbols of a ``multiple="true"`` field: an array, or one symbol alone."""
    data.rewind()
    if not data.next():
        return []
    value = data.get_object()
    values = getattr(value, "elements", None)
    if values is None:
        values = value if isinstance(value, list) else [value]
    return [str(v) for v in values]


def link_policy(default: UnroutablePolicy,
                terminus: Terminus) -> tuple[UnroutablePolicy, list[str]]:
    """The policy of a link whose client target is ``terminus``, and the capabilities
    it honours (to echo). Raises :class:`Amqp10Error` (``amqp:invalid-field``) when
    the target asks for two policies."""
    honoured = [s for s in capability_symbols(terminus.capabilities) if s in TARGET_CAPABILITIES]
    chosen = {TARGET_CAPABILITIES[s] for s in honoured}
    if len(chosen) > 1:
        raise Amqp10Error(ErrorCondition.INVALID_FIELD, "target capabilities "
                          f"{' and '.join(honoured)} ask for different unroutable outcomes")
    return (chosen.pop() if chosen else default), honoured


def echo_capabilities(terminus: Terminus, symbols: Iterable[str]) -> None:
    """Put ``symbols`` in our attach's ``terminus`` capabilities (nothing when empty)."""
    symbols = list(symbols)
    if not symbols:
        return
    data = terminus.capabilities
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for name in symbols:
        data.put_symbol(name)
    data.exit()


def unroutable_text(exchange_label: str, routing_key: str) -> str:
    """The ``rejected`` outcome's description: the exchange (with its vhost) and the key."""
    return f"no route for routing key '{routing_key}' from {exchange_label}"


def settle_unroutable(policy: UnroutablePolicy, presettled: bool, counts: UnroutableCounts,
                      vhost: VirtualHost, exchange: str, routing_key: str
                      ) -> tuple[int, Optional[Condition], Optional[str]]:
    """Count one unroutable message (published to ``exchange`` of ``vhost``) and decide
    how it is settled: ``(outcome, condition, ledger reason)``; the reason is None when
    it is dropped."""
    if presettled or policy is UnroutablePolicy.ACCEPT:
        counts.dropped_amqp10 += 1
        return Delivery.ACCEPTED, None, None
    counts.returned_amqp10 += 1
    if policy is UnroutablePolicy.RELEASE:
        return Delivery.RELEASED, None, UNROUTABLE_RELEASED
    node = vhost.exchange(exchange)
    text = unroutable_text(node.label if node is not None else f"exchange '{exchange}'",
                           routing_key)
    # amqp:not-found, as Broker-J rejects it ("Unknown destination"): no node takes it
    return Delivery.REJECTED, Condition(ErrorCondition.NOT_FOUND.value, text), text
