"""``relay_permissions``: what each relayed 0-9-1 method needs of a service account's user."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.amqp091.relay_permissions import needed
from gateway.auth import Action


def test_rabbitmqs_rules() -> None:
    publish = m.BasicPublish.make(0, "amq.direct", "k", False, False)
    assert list(needed(publish)) == [(Action.WRITE, "amq.direct")]
    assert list(needed(m.BasicPublish.make(0, "", "q", False, False))) == [(Action.WRITE, "")]
    bind = m.QueueBind(ticket=0, queue="q", exchange="x", routing_key="k", nowait=False, arguments={})
    assert list(needed(bind)) == [(Action.WRITE, "q"), (Action.READ, "x")]
    declare = m.QueueDeclare(ticket=0, queue="q", passive=False, durable=True, exclusive=False,
                             auto_delete=False, nowait=False, arguments={})
    assert list(needed(declare)) == [(Action.CONFIGURE, "q")]


def test_passive_declares_server_named_queues_and_other_methods_need_nothing() -> None:
    passive = m.QueueDeclare(ticket=0, queue="q", passive=True, durable=False, exclusive=False,
                             auto_delete=False, nowait=False, arguments={})
    server_named = m.QueueDeclare(ticket=0, queue="", passive=False, durable=False, exclusive=True,
                                  auto_delete=True, nowait=False, arguments={})
    for method in (passive, server_named, m.BasicAck(delivery_tag=1, multiple=False), m.ChannelOpen()):
        assert list(needed(method)) == []
