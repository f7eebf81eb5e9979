"""Durable subscriptions in the broker model: names, the expiry order, the timeout and the
listing (``gateway.broker.subscriptions``)."""
from __future__ import annotations

from gateway.broker.subscriptions import (Ending, Expiry, expire, expires_on, list_subscriptions, resume,
                                          subscription_arguments, subscription_queue_name)
from gateway.broker.vhost import VirtualHost


def test_queue_name_from_container_and_link():
    assert subscription_queue_name("client-1", "orders") == "sub.client-1.orders"
    long_name = subscription_queue_name("c" * 200, "l" * 200)
    assert long_name.startswith("sub.") and len(long_name) <= 255
    assert long_name != subscription_queue_name("c" * 200, "l" * 199)


def test_an_ending_expires_policies_no_longer_lived_than_itself():
    assert expires_on(Expiry.LINK_DETACH, Ending.LINK_DETACH)
    assert not expires_on(Expiry.SESSION_END, Ending.LINK_DETACH)
    assert expires_on(Expiry.SESSION_END, Ending.CONNECTION_CLOSE)
    assert not expires_on(Expiry.NEVER, Ending.CONNECTION_CLOSE)


def test_a_timeout_expires_the_unused_queue_later_and_a_resume_cancels_it():
    vhost = VirtualHost("/")
    queue = vhost.declare_queue("sub.c.l", arguments=subscription_arguments("c", "l", "/topic/x"))
    expire(queue, 5, now=100.0, reason="test")
    assert not queue.deleted and queue.expires_at() == 105.0
    resume(queue)
    assert queue.expires_at() is None
    expire(queue, 5, now=200.0, reason="test")
    vhost.tick(205.0)
    assert queue.deleted and vhost.queue("sub.c.l") is None


def test_listing_reads_the_identity_from_the_queue_arguments():
    vhost = VirtualHost("/")
    vhost.declare_queue("plain")
    vhost.declare_queue("sub.c.l", durable=True,
                        arguments=subscription_arguments("c", "l", "/topic/x"))
    [sub] = list_subscriptions(vhost)
    assert (sub.queue, sub.link_name, sub.container_id, sub.source, sub.durable) == (
        "sub.c.l", "l", "c", "/topic/x", True)
    expire(vhost.queue("sub.c.l"), 0, now=1.0, reason="unsubscribe")
    assert list_subscriptions(vhost) == []
