"""``/queue/Q`` and ``Q`` declare a missing queue through the link's ``VhostDirectory``:
the plugin's queue properties, the CONFIGURE permission, nothing left behind on refusal."""
from __future__ import annotations

import pytest
from proton import Delivery, Endpoint

from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password
from tests.support.amqp10_pump import Amqp10Pump, encode_message, engine_factory

EVERYTHING = Permission(".*", ".*", ".*")


@pytest.fixture(scope="module")
def users() -> UserDirectory:
    password = hash_password("pw")
    return UserDirectory([
        User("root", password, permissions={"/": EVERYTHING}),
        # may use any queue, but create none
        User("user", password, permissions={"/": Permission("", ".*", ".*")}),
        # may create 'own.*' queues, but neither publish to the default exchange nor read
        User("maker", password, permissions={"/": Permission(r"own\..*", "amq\\.topic", "")}),
    ])


@pytest.fixture()
def vhost(broker):
    return broker.vhost("/")


@pytest.fixture()
def login(broker, users):
    def make(user: str = "root") -> Amqp10Pump:
        pump = Amqp10Pump(engine_factory(broker, Authenticator(users)), user=user, password="pw")
        return pump.open()
    return make


def _refusal(link) -> tuple[str, str]:
    assert link.state & Endpoint.REMOTE_CLOSED
    return link.remote_condition.name, link.remote_condition.description


@pytest.mark.parametrize("address", ["/queue/new", "new"])
def test_a_sending_link_declares_the_queue_it_names(login, vhost, address):
    pump = login()
    sender = pump.sender(address)
    assert sender.state & Endpoint.REMOTE_ACTIVE
    queue = vhost.queue("new")
    assert queue is not None
    assert (queue.durable, queue.exclusive_owner, queue.auto_delete) == (False, None, False)
    assert pump.send(sender, encode_message("m")).remote_state == Delivery.ACCEPTED
    assert queue.message_count == 1


@pytest.mark.parametrize("address", ["/queue/new", "new"])
def test_a_receiving_link_declares_the_queue_it_names(login, vhost, address):
    pump = login()
    receiver = pump.receiver(address, credit=1)
    assert receiver.state & Endpoint.REMOTE_ACTIVE
    assert vhost.queue("new").consumer_count == 1
    receiver.close()
    pump.pump()
    assert vhost.queue("new") is not None  # not auto-delete, not the link's own


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_terminus_durability_decides_the_declared_queues_durability(login, vhost, durable, role):
    pump = login()
    getattr(pump, role)("/queue/new", durable=durable)
    assert vhost.queue("new").durable is durable


@pytest.mark.parametrize("durable", [False, True])
def test_an_existing_queue_of_any_durability_is_used_as_it_is(login, vhost, durable):
    vhost.declare_queue("kept", durable=durable, arguments={"x-max-length": 5})
    pump = login()
    sender = pump.sender("/queue/kept", durable=not durable)
    receiver = pump.receiver("/queue/kept", durable=not durable)
    assert sender.state & Endpoint.REMOTE_ACTIVE and receiver.state & Endpoint.REMOTE_ACTIVE
    queue = vhost.queue("kept")
    assert queue.durable is durable and queue.arguments == {"x-max-length": 5}


def test_an_existing_queue_needs_no_configure_permission(login, vhost):
    pump = login("user")
    assert pump.sender("/queue/q1", name="s").state & Endpoint.REMOTE_ACTIVE
    assert pump.receiver("/queue/q1", name="r").state & Endpoint.REMOTE_ACTIVE


@pytest.mark.parametrize("role", ["sender", "receiver"])
def test_declaring_needs_configure_and_the_refusal_names_it(login, vhost, role):
    pump = login("user")
    condition, text = _refusal(getattr(pump, role)("/queue/new"))
    assert condition == "amqp:unauthorized-access"
    assert text == "configure access to resource 'new' in vhost '/' refused for user 'user'"
    assert vhost.queue("new") is None


@pytest.mark.parametrize("role, refused", [
    ("sender", "write access to resource 'amq.default'"),
    ("receiver", "read access to resource 'own.q'"),
])
def test_a_link_refused_for_its_use_declares_nothing(login, vhost, role, refused):
    pump = login("maker")
    condition, text = _refusal(getattr(pump, role)("/queue/own.q"))
    assert condition == "amqp:unauthorized-access" and text.startswith(refused)
    assert vhost.queue("own.q") is None


def test_a_relayed_message_declares_its_to(login, vhost):
    pump = login()
    relay = pump.sender(None)
    assert pump.send(relay, encode_message("m", address="/queue/new")).remote_state == Delivery.ACCEPTED
    assert vhost.queue("new").message_count == 1


def test_a_relayed_message_without_configure_is_rejected(login, vhost):
    pump = login("user")
    relay = pump.sender(None)
    refused = pump.send(relay, encode_message("m", address="/queue/new"))
    assert refused.remote_state == Delivery.REJECTED
    assert refused.remote.condition.name == "amqp:unauthorized-access"
    assert refused.remote.condition.description.startswith("configure access to resource 'new'")
    assert relay.state & Endpoint.REMOTE_ACTIVE
    assert vhost.queue("new") is None


def test_the_reserved_prefix_is_refused(login, vhost):
    pump = login()
    condition, text = _refusal(pump.sender("/queue/amq.mine"))
    assert condition == "amqp:unauthorized-access"
    assert "reserved prefix 'amq.*'" in text


@pytest.mark.parametrize("address", ["/amq/queue/new", "/queues/new", "new@gateway-test"])
def test_the_other_queue_forms_still_need_the_queue(login, vhost, address):
    pump = login()
    condition, text = _refusal(pump.sender(address))
    assert condition == "amqp:not-found"
    assert text == f"no queue 'new' in vhost '/' (address '{address}')"
    assert vhost.queue("new") is None
