"""``node@container`` on one gateway whose remote is down: local resolution, refusal of
unknown containers, and the durable outbox (accepted / confirmed once written; kept
across kill -9). Two gateways forwarding to each other: ``test_forwarding_two_gateways``."""
from __future__ import annotations

import pika
import pytest
from proton import Delivery, Message
from proton.utils import LinkDetached

from tests.support.access_config import access_config, write_users_file
from tests.support.cross_protocol_clients import pika_channel, pika_get, proton_connection, unique
from tests.support.gateway_process import Gateway, default_config, free_port, make_gateway

pytestmark = pytest.mark.integration


def org_a(state_dir, port: int, extra: str = "", process: bool = False) -> Gateway:
    return make_gateway(process=process, config_text=default_config(extra=(
        f"container_id: org-a\nstate_dir: {state_dir}\n"
        "forwarding:\n  remotes:\n"
        f"    - container: org-b\n      host: 127.0.0.1\n      port: {port}\n"
        "      reconnect_initial: 0.2\n      reconnect_max: 1.0\n" + extra)))


@pytest.fixture
def gw(tmp_path):
    g = org_a(tmp_path, free_port()).start()
    yield g
    g.stop()


def test_unknown_container_is_refused_at_attach_naming_it(gw) -> None:
    c = proton_connection(gw)
    try:
        with pytest.raises(LinkDetached) as info:
            c.create_sender("orders@nowhere")
        assert "amqp:not-found" in str(info.value) and "unknown container 'nowhere'" in str(info.value)
    finally:
        c.close()


def test_relayed_message_to_unknown_container_is_rejected_not_found(gw) -> None:
    c = proton_connection(gw)
    try:
        sender = c.create_sender(None)
        delivery = sender.send(Message(address="orders@nowhere", body="x"), error_states=[])
        assert delivery.remote_state == Delivery.REJECTED
        condition = delivery.remote.condition
        assert condition.name == "amqp:not-found"
        assert "unknown container 'nowhere'" in condition.description
    finally:
        c.close()


def test_amqp_transfer_link_rejects_unknown_containers_and_a_missing_to(gw) -> None:
    c = proton_connection(gw)
    try:
        sender = c.create_sender("amqp$transfer")
        delivery = sender.send(Message(address="orders@nowhere", body="x"), error_states=[])
        assert delivery.remote_state == Delivery.REJECTED
        assert delivery.remote.condition.name == "amqp:not-found"
        assert "unknown container 'nowhere'" in delivery.remote.condition.description
        delivery = sender.send(Message(body="no to"), error_states=[])
        assert delivery.remote_state == Delivery.REJECTED
        assert delivery.remote.condition.name == "amqp:invalid-field"
        assert "the message has no 'to' address" in delivery.remote.condition.description
        sender.send(Message(address="orders@org-b", body="to a known remote"))  # accepted
    finally:
        c.close()


def test_amqp091_mandatory_publish_to_unknown_container_is_returned(gw) -> None:
    conn, ch = pika_channel(gw)
    try:
        ch.confirm_delivery()
        with pytest.raises(pika.exceptions.UnroutableError):
            ch.basic_publish("", "orders@nowhere", b"x", mandatory=True)
    finally:
        conn.close()


def test_node_at_us_still_resolves_locally(gw) -> None:
    conn, ch = pika_channel(gw)
    try:
        q = unique("local")
        ch.queue_declare(q)
        ch.basic_publish("", f"{q}@org-a", b"here")
        assert pika_get(ch, q)[2] == b"here"
    finally:
        conn.close()


def test_a_to_other_than_the_link_address_is_rejected(gw) -> None:
    c = proton_connection(gw)
    try:
        sender = c.create_sender("orders@org-b")
        delivery = sender.send(Message(address="other@org-b", body="x"), error_states=[])
        assert delivery.remote_state == Delivery.REJECTED
        condition = delivery.remote.condition
        assert condition.name == "amqp:precondition-failed"
        assert "'other@org-b'" in condition.description and "'orders@org-b'" in condition.description
        sender.send(Message(body="no to: the link's address"))  # accepted
    finally:
        c.close()


@pytest.mark.process
def test_outbox_accepts_while_the_remote_is_down_and_survives_kill_9(tmp_path) -> None:
    port = free_port()
    gw = org_a(tmp_path, port, process=True).start()
    try:
        c = proton_connection(gw)
        sender = c.create_sender("orders@org-b")
        for i in range(5):
            sender.send(Message(body=f"m{i}"))  # waits for accepted
        c.close()
        conn, ch = pika_channel(gw)
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("", "orders@org-b", b"091-%d" % i)  # raises unless confirmed
        conn.close()
    finally:
        gw.kill()
    again = org_a(tmp_path, port).start()
    try:
        assert again.wait_for_log(r"restored 8 message\(s\) waiting to be forwarded")
    finally:
        again.stop()


def test_write_permission_is_checked_on_the_whole_global_address(tmp_path) -> None:
    """``carol`` may write ``amq.default`` and ``orders@org-b`` only: ``secret@org-b`` is
    refused in both protocols, naming the whole address."""
    users = write_users_file(str(tmp_path), {"carol": {
        "password": "pw", "loopback_only": False,
        "permissions": {"/": {"configure": "", "write": r"^(amq\.default|orders@org-b)$",
                              "read": ""}}}})
    gw = make_gateway(config_text=access_config(users_file=users, extra=(
        f"container_id: org-a\nstate_dir: {tmp_path}\nforwarding:\n  remotes:\n"
        f"    - container: org-b\n      host: 127.0.0.1\n      port: {free_port()}\n"))).start()
    try:
        c = proton_connection(gw, user="carol", password="pw")
        try:
            c.create_sender("orders@org-b").send(Message(body="allowed"))
            with pytest.raises(LinkDetached) as info:
                c.create_sender("secret@org-b")
            assert "amqp:unauthorized-access" in str(info.value)
            assert "'secret@org-b'" in str(info.value)
        finally:
            c.close()
        params = pika.ConnectionParameters("127.0.0.1", gw.amqp_port,
                                           credentials=pika.PlainCredentials("carol", "pw"))
        conn = pika.BlockingConnection(params)
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("", "orders@org-b", b"allowed")
        ch.basic_publish("", "orders@org-b", b"allowed again")  # the grant remembered
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            ch.basic_publish("", "secret@org-b", b"refused")
        assert refused.value.reply_code == 403 and "secret@org-b" in refused.value.reply_text
        conn.close()
    finally:
        gw.stop()
