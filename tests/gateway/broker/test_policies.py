"""Policies (``gateway/broker/policies.py``, ``vhost_policies.py``): which policy applies,
how it combines with a queue's own arguments (RabbitMQ 3.x: the stricter of the two
limits, the argument for the rest), and that setting or clearing one changes existing
queues and exchanges; and the vhost's ``max-queues`` limit."""
from __future__ import annotations

import pytest

from gateway.broker import DestinationKind, InvalidArgument
from gateway.broker.errors import ResourceLimitExceeded
from gateway.broker.policies import QUEUE_KEYS, best_policy, parse_policy, with_policy

Q = DestinationKind.QUEUE


def taken(q, now: float = 0.0) -> list:
    """The payloads a consumer would get now, taken."""
    out = []
    while (entry := q.get(now, ack=False)) is not None:
        out.append(entry.message.payload)
    return out


def policy(name: str = "p", pattern: str = "^q", priority: int = 0, apply_to: str = "all", **definition):
    return parse_policy("/", name, {"pattern": pattern, "priority": priority, "apply-to": apply_to,
                                    "definition": {k.replace("_", "-"): v for k, v in definition.items()}})


def test_the_highest_priority_matching_policy_applies_and_ties_go_by_name() -> None:
    low, high = policy("low", "^q", 1, max_length=5), policy("high", "^qu", 7, max_length=1)
    twin = policy("a-twin", "^qu", 7, max_length=2)
    assert best_policy([low, high], "queues", "queue-1") is high
    assert best_policy([low, high], "queues", "q-other") is low
    assert best_policy([low, high], "queues", "other") is None
    assert best_policy([high, twin], "queues", "queue") is twin
    only_exchanges = policy("x", "^q", 9, apply_to="exchanges", alternate_exchange="ae")
    assert best_policy([low, only_exchanges], "queues", "q") is low
    assert best_policy([low, only_exchanges], "exchanges", "q") is only_exchanges


def test_limits_take_the_stricter_value_and_the_argument_wins_for_the_rest() -> None:
    p = policy(max_length=10, message_ttl=5000, expires=60000, max_length_bytes=100,
               dead_letter_exchange="dlx-p", overflow="reject-publish")
    args = {"x-max-length": 20, "x-message-ttl": 1000, "x-dead-letter-exchange": "dlx-a"}
    assert with_policy(args, p, QUEUE_KEYS) == {
        "x-max-length": 10, "x-message-ttl": 1000, "x-expires": 60000, "x-max-length-bytes": 100,
        "x-dead-letter-exchange": "dlx-a", "x-overflow": "reject-publish"}
    assert with_policy(args, None, QUEUE_KEYS) == args


def test_a_policy_routing_key_without_any_dead_letter_exchange_has_no_effect() -> None:
    p = policy(dead_letter_routing_key="rk")
    assert with_policy({}, p, QUEUE_KEYS) == {}
    assert with_policy({"x-dead-letter-exchange": "dlx"}, p, QUEUE_KEYS) == {
        "x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "rk"}


@pytest.mark.parametrize("body,words", [
    ({"pattern": "(", "definition": {"max-length": 1}}, "is not a regular expression"),
    ({"pattern": "^q", "definition": {}}, "definition must be a non-empty JSON object"),
    ({"pattern": "^q", "definition": {"max-length": -1}}, "max-length must be at least 0, not -1"),
    ({"pattern": "^q", "definition": {"max-length": "9"}}, "max-length must be an integer"),
    ({"pattern": "^q", "definition": {"overflow": "explode"}}, "overflow must be one of drop-head"),
    ({"pattern": "^q", "definition": {"federation-upstream": "x"}}, "key 'federation-upstream' is not supported"),
    ({"pattern": "^q", "apply-to": "streams", "definition": {"max-length": 1}}, "apply-to must be one of"),
    ({"pattern": "^q", "priority": "high", "definition": {"max-length": 1}}, "priority must be an integer"),
])
def test_bad_policies_are_refused_naming_the_problem(body, words) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_policy("/", "p", body)
    assert info.value.text.startswith("policy 'p': ") and words in info.value.text


def test_keys_without_effect_on_one_node_are_accepted() -> None:
    p = parse_policy("/", "ha", {"pattern": ".*", "definition": {"ha-mode": "all", "max-length": 3}})
    assert p.as_dict() == {"vhost": "/", "name": "ha", "pattern": ".*", "apply-to": "all",
                           "definition": {"ha-mode": "all", "max-length": 3}, "priority": 0}


def test_a_new_queue_takes_the_policy_and_redeclares_compare_declared_arguments(vhost, msg) -> None:
    vhost.policies.put(policy(max_length=2), 0.0)
    q = vhost.declare_queue("q1", arguments={"x-max-length": 5})
    assert q.policy.name == "p" and q.args.max_length == 2 and q.arguments == {"x-max-length": 5}
    assert vhost.declare_queue("q1", arguments={"x-max-length": 5}) is q
    for body in "abc":
        vhost.publish("", "q1", msg(body), 0.0)
    assert q.message_count == 2


def test_setting_a_lower_limit_drops_from_the_head_now_and_dead_letters(vhost, msg) -> None:
    vhost.declare_queue("dead")
    vhost.declare_exchange("dlx", "fanout")
    vhost.bind(Q, "dead", "dlx")
    q = vhost.declare_queue("q1")
    for body in "abcde":
        vhost.publish("", "q1", msg(body), 0.0)
    vhost.policies.put(policy(max_length=2, dead_letter_exchange="dlx"), 1.0)
    assert q.message_count == 2
    dead = vhost.queue("dead")
    assert dead.message_count == 3
    assert dead.get(1.0, ack=False).message.deaths[0]["reason"] == "maxlen"
    assert taken(q) == ["d", "e"]
    assert vhost.policies.remove("p", 2.0) and q.policy is None and q.args.max_length is None
    assert not vhost.policies.remove("p", 2.0)


def test_a_new_ttl_applies_to_messages_published_after_it(vhost, msg) -> None:
    q = vhost.declare_queue("q1")
    vhost.publish("", "q1", msg("before"), 0.0)
    vhost.policies.put(policy(message_ttl=1000), 0.0)
    vhost.publish("", "q1", msg("after"), 0.0)
    assert taken(q, now=5.0) == ["before"]


def test_expires_from_a_policy_deletes_an_unused_queue(vhost) -> None:
    vhost.declare_queue("q1", now=0.0)
    vhost.policies.put(policy(expires=1000), 0.0)
    vhost.tick(0.5)
    assert vhost.queue("q1") is not None
    vhost.tick(1.5)
    assert vhost.queue("q1") is None


def test_an_exchange_policy_sets_the_alternate_exchange_unless_it_has_its_own(vhost, msg) -> None:
    vhost.declare_queue("unrouted")
    vhost.declare_exchange("ae", "fanout")
    vhost.bind(Q, "unrouted", "ae")
    x = vhost.declare_exchange("x1", "direct")
    own = vhost.declare_exchange("x2", "direct", arguments={"alternate-exchange": "amq.fanout"})
    vhost.policies.put(policy("aep", "^x", apply_to="exchanges", alternate_exchange="ae"), 0.0)
    assert (x.alternate_exchange, own.alternate_exchange) == ("ae", "amq.fanout")
    vhost.publish("x1", "nowhere", msg("m"), 0.0)
    assert vhost.queue("unrouted").message_count == 1
    later = vhost.declare_exchange("x3", "topic")
    assert later.alternate_exchange == "ae"
    vhost.policies.remove("aep", 0.0)
    assert x.alternate_exchange is None and own.alternate_exchange == "amq.fanout"


def test_a_policy_queue_mode_is_ignored_on_a_quorum_queue_as_rabbitmq_does(vhost) -> None:
    vhost.policies.put(policy(queue_mode="lazy", max_length=3), 0.0)
    quorum = vhost.declare_queue("q-quorum", durable=True, arguments={"x-queue-type": "quorum"})
    assert quorum.quorum and quorum.args.max_length == 3
    vhost.policies.put(policy(queue_mode="lazy", max_length=2), 0.0)
    assert quorum.args.max_length == 2
    with pytest.raises(InvalidArgument, match="x-queue-mode"):
        vhost.declare_queue("q-declared", durable=True,
                            arguments={"x-queue-type": "quorum", "x-queue-mode": "lazy"})


def test_the_vhost_queue_limit_refuses_new_queues_only(vhost) -> None:
    vhost.declare_queue("q1")
    vhost.limits.replace({"max-queues": 1})
    assert vhost.declare_queue("q1") is vhost.queue("q1")   # a redeclare is no new queue
    with pytest.raises(ResourceLimitExceeded) as info:
        vhost.declare_queue("q2")
    assert info.value.text == "cannot declare queue 'q2': queue limit in vhost '/' (1) is reached"
    vhost.limits.replace({"max-queues": -1})
    vhost.declare_queue("q2")
    vhost.limits.replace({"max-queues": 0, "max-connections": 3})
    assert vhost.limits.max_connections == 3
    with pytest.raises(ResourceLimitExceeded):
        vhost.declare_queue("q3")
    with pytest.raises(InvalidArgument, match="unknown vhost limit 'max-channels'"):
        vhost.limits.replace({"max-channels": 1})
    assert vhost.limits.as_dict() == {"max-queues": 0, "max-connections": 3}
