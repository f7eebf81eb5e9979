"""The unroutable outcome: the policy a link's target capabilities choose, and settling."""
from __future__ import annotations

import pytest
from proton import Connection, Delivery, symbol

from gateway.amqp10.conditions import Amqp10Error
from gateway.amqp10.unroutable_outcome import (
    DISCARD_UNROUTABLE, REJECT_UNROUTABLE, echo_capabilities, link_policy, settle_unroutable,
)
from gateway.broker import Broker, UnroutableCounts, UnroutablePolicy
from tests.support.amqp10_link_options import ask_capabilities

ACCEPT, RELEASE, REJECT = UnroutablePolicy.ACCEPT, UnroutablePolicy.RELEASE, UnroutablePolicy.REJECT


#: the senders whose targets the tests read: a terminus does not keep its link (and so its
#: memory) alive, and reading one whose link was collected crashed the test process
_SENDERS: list = []


def _target(*capabilities, single: bool = False):
    """A proton target terminus carrying ``capabilities`` (as an array, or one symbol)."""
    connection = Connection()
    sender = connection.session().sender("s")
    _SENDERS.append((connection, sender))
    target = sender.target
    if single:
        target.capabilities.put_symbol(capabilities[0])
    elif capabilities:
        ask_capabilities(target, capabilities)
    return target


@pytest.mark.parametrize("default", list(UnroutablePolicy))
def test_without_capabilities_the_default_holds(default):
    assert link_policy(default, _target()) == (default, [])


@pytest.mark.parametrize("capability, policy", [
    (DISCARD_UNROUTABLE, ACCEPT), ("discard-unroutable", ACCEPT),
    (REJECT_UNROUTABLE, REJECT), ("reject-unroutable", REJECT),
])
@pytest.mark.parametrize("default", list(UnroutablePolicy))
def test_a_capability_overrides_the_default(capability, policy, default):
    assert link_policy(default, _target("shared", capability)) == (policy, [capability])


def test_broker_j_spells_the_symbols_in_capitals():
    assert (DISCARD_UNROUTABLE, REJECT_UNROUTABLE) == ("DISCARD_UNROUTABLE", "REJECT_UNROUTABLE")


def test_a_single_symbol_counts_as_a_list_of_one():
    assert link_policy(RELEASE, _target(REJECT_UNROUTABLE, single=True)) == (REJECT, [REJECT_UNROUTABLE])


def test_unknown_capabilities_are_ignored():
    assert link_policy(RELEASE, _target("topic", "queue")) == (RELEASE, [])


def test_asking_for_both_outcomes_is_an_invalid_field():
    with pytest.raises(Amqp10Error) as info:
        link_policy(ACCEPT, _target(DISCARD_UNROUTABLE, REJECT_UNROUTABLE))
    assert info.value.condition.value == "amqp:invalid-field"
    assert "DISCARD_UNROUTABLE and REJECT_UNROUTABLE" in info.value.description


def test_echo_writes_a_symbol_array_and_nothing_when_empty():
    target = _target()
    echo_capabilities(target, [])
    target.capabilities.rewind()
    assert target.capabilities.next() is None
    echo_capabilities(target, [REJECT_UNROUTABLE])
    target.capabilities.rewind()
    target.capabilities.next()
    assert list(target.capabilities.get_object().elements) == [symbol(REJECT_UNROUTABLE)]


@pytest.fixture()
def vhost():
    return Broker(container_id="t").vhost("/")


@pytest.mark.parametrize("policy, outcome, reason, dropped", [
    (ACCEPT, Delivery.ACCEPTED, None, 1),
    (RELEASE, Delivery.RELEASED, "released", 0),
    (REJECT, Delivery.REJECTED,
     "no route for routing key 'a.b' from exchange 'amq.topic' in vhost '/'", 0),
])
def test_settle_counts_and_decides(vhost, policy, outcome, reason, dropped):
    counts = UnroutableCounts()
    got, condition, why = settle_unroutable(policy, False, counts, vhost, "amq.topic", "a.b")
    assert (got, why) == (outcome, reason)
    assert (counts.dropped_amqp10, counts.returned_amqp10) == (dropped, 1 - dropped)
    assert (counts.dropped_amqp091, counts.returned_amqp091) == (0, 0)
    if policy is REJECT:
        assert (condition.name, condition.description) == ("amqp:not-found", reason)
    else:
        assert condition is None


def test_rejection_names_the_default_exchange(vhost):
    _, condition, _ = settle_unroutable(REJECT, False, UnroutableCounts(), vhost, "", "nope")
    assert condition.description == ("no route for routing key 'nope' from the default "
                                     "exchange in vhost '/'")


@pytest.mark.parametrize("policy", list(UnroutablePolicy))
def test_a_presettled_message_is_dropped_whatever_the_policy(vhost, policy):
    counts = UnroutableCounts()
    assert settle_unroutable(policy, True, counts, vhost, "amq.topic", "k") == (
        Delivery.ACCEPTED, None, None)
    assert (counts.dropped_amqp10, counts.returned_amqp10) == (1, 0)
