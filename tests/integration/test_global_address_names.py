"""Issue 41, item 3: a local queue or exchange cannot capture traffic for ``node@container``.

The rule (``gateway.broker.entity_names``), the same for 0-9-1, 1.0 and the HTTP API: a
global address whose container is this gateway or one it forwards to always means that
node, and declaring a local queue or exchange of that name is refused saying why (0-9-1
406, 1.0 400 from ``$management`` / ``amqp:invalid-field``, HTTP 400). Other names with
``@`` stay allowed, as in RabbitMQ. A queue of such a name that an older version let in
(restored from the store) no longer takes the traffic: the publish is forwarded."""
from __future__ import annotations

from urllib.parse import quote

import pika
import pytest
from proton import Message
from proton.utils import LinkDetached

from tests.support.amqp091_clients import pika_connection, unique
from tests.support.amqp_management_client import ManagementClient
from tests.support.cross_protocol_clients import proton_connection
from tests.support.gateway_process import Gateway, default_config, free_port, make_gateway
from tests.support.management_http import MANAGEMENT_USERS, call

pytestmark = pytest.mark.integration


def _gateway(state_dir, *, remote_port: int | None) -> Gateway:
    forwarding = ("" if remote_port is None else
                  "forwarding:\n  remotes:\n"
                  f"    - container: org-b\n      host: 127.0.0.1\n      port: {remote_port}\n"
                  "      reconnect_initial: 0.2\n      reconnect_max: 1.0\n")
    return make_gateway(
        config_text=default_config(users=MANAGEMENT_USERS,
                                   extra=f"container_id: org-a\nstate_dir: {state_dir}\n{forwarding}"),
        extra_args=("--management", "127.0.0.1:0"))


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    g = _gateway(tmp_path_factory.mktemp("org-a"), remote_port=free_port()).start()
    yield g
    g.stop()


def _refused_over_amqp091(gw, declare) -> str:
    conn = pika_connection(gw)
    try:
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
            declare(conn.channel())
        return f"{info.value.reply_code} {info.value.reply_text}"
    finally:
        conn.close()


@pytest.mark.parametrize("name", ["orders@org-b", "/queue/orders@org-b", "orders@org-a"])
def test_pika_cannot_declare_a_queue_or_exchange_named_by_a_global_address(gw, name):
    text = _refused_over_amqp091(gw, lambda ch: ch.queue_declare(name, durable=True))
    assert text.startswith(f"406 PRECONDITION_FAILED - queue name '{name}' is the global address")
    assert "would never get the messages sent to that address" in text
    text = _refused_over_amqp091(gw, lambda ch: ch.exchange_declare(name, "fanout"))
    assert text.startswith(f"406 PRECONDITION_FAILED - exchange name '{name}' is the global address")


def test_proton_cannot_declare_one_either(gw):
    conn = proton_connection(gw, user="admin", password=MANAGEMENT_USERS["admin"][0])
    try:
        reply = ManagementClient(conn).call("CREATE", "queue", "orders@org-b", body={})
        assert reply.status == 400
        assert "which this gateway forwards to" in reply.description
        # /queue/Q declares Q when missing: not under a forwarded address
        with pytest.raises(LinkDetached) as info:
            conn.create_receiver("/queue/orders@org-b")
        assert "orders@org-b" in str(info.value)
    finally:
        conn.close()


def test_nor_can_the_http_api(gw):
    answer = call(gw, "PUT", f"/api/queues/%2F/{quote('orders@org-b', safe='')}", {"durable": True})
    assert answer.status == 400
    assert "which this gateway forwards to" in answer.body["reason"]


def test_other_names_with_an_at_sign_are_allowed_as_in_rabbitmq(gw):
    name = unique("alice") + "@example.com"
    conn = pika_connection(gw)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(name)
        ch.basic_publish("", name, b"for alice")
        method, _props, body = ch.basic_get(name, auto_ack=True)
        assert body == b"for alice"
    finally:
        conn.close()
    assert call(gw, "PUT", f"/api/queues/%2F/{quote(unique('bob') + '@example.org', safe='')}",
                {"durable": False}).status == 201


def test_a_restored_queue_of_a_forwarded_name_no_longer_takes_its_traffic(tmp_path):
    before = _gateway(tmp_path, remote_port=None).start()  # org-b unknown: the name is local
    try:
        conn = pika_connection(before)
        conn.channel().queue_declare("orders@org-b", durable=True)
        conn.close()
    finally:
        before.stop()
    after = _gateway(tmp_path, remote_port=free_port()).start()
    try:
        conn = pika_connection(after)
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            for i in range(3):
                ch.basic_publish("", "orders@org-b", b"m%d" % i)  # confirmed: in the outbox
            assert ch.queue_declare("orders@org-b", passive=True).method.message_count == 0
        finally:
            conn.close()
        c = proton_connection(after)
        try:
            c.create_sender("orders@org-b").send(Message(body="from 1.0"))
        finally:
            c.close()
        status = call(after, "GET", "/api/gateway/remotes").body
        assert [r["outbox_depth"] for r in status if r["container"] == "org-b"] == [4], status
    finally:
        after.stop()
