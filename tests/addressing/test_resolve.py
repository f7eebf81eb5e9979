from dataclasses import dataclass, field

import pytest

from addressing.address import ExchangeAddress, GlobalAddress, QueueAddress
from addressing.errors import AddressError, AddressErrorKind
from addressing.resolve import (
    Forward, LocalConsume, LocalPublish, ServiceRoute, SubjectPublish, TemporaryBinding,
    resolve_link_target, resolve_source, resolve_target, route_message,
)

US = "gw-1"


@dataclass
class FakeDirectory:
    exchanges: set[str] = field(default_factory=lambda: {"", "amq.topic", "amq.direct", "X"})
    queues: set[str] = field(default_factory=lambda: {"q", "orders", "a/b"})
    services: set[str] = field(default_factory=lambda: {"amqp$transfer", "amqp$management"})
    #: containers the transfer service has a route to (it answers for ``x@container``)
    remotes: set[str] = field(default_factory=lambda: {"remote"})
    #: queues declared through ``declare_queue``, in order
    declared: list[str] = field(default_factory=list)

    def has_exchange(self, name: str) -> bool:
        return name in self.exchanges

    def has_queue(self, name: str) -> bool:
        return name in self.queues

    def has_service(self, name: str) -> bool:
        if "@" in name:
            return name.rpartition("@")[2] in self.remotes
        return name in self.services

    def declare_queue(self, name: str) -> None:
        self.declared.append(name)
        self.queues.add(name)


class Refused(Exception):
    """What a directory raises to refuse a declare (the resolver passes it on)."""


class RefusingDirectory(FakeDirectory):
    def declare_queue(self, name: str) -> None:
        raise Refused(f"configure access to resource '{name}' refused")


DIR = FakeDirectory()


def link_target(address, directory=DIR):
    return resolve_link_target(address, our_container=US, directory=directory)


def source(address, directory=DIR):
    return resolve_source(address, our_container=US, directory=directory)


@pytest.mark.parametrize("address, route", [
    ("/exchange/X/rk", LocalPublish("X", "rk")),
    ("/exchange/X", SubjectPublish("X")),
    ("/exchanges/X", LocalPublish("X", "")),
    ("/exchanges/X/rk", LocalPublish("X", "rk")),
    ("/topic/a.b", LocalPublish("amq.topic", "a.b")),
    ("/queue/q", LocalPublish("", "q")),
    ("/amq/queue/q", LocalPublish("", "q")),
    ("/queues/a%2Fb", LocalPublish("", "a/b")),
    ("q", LocalPublish("", "q")),
    ("/queue", SubjectPublish("")),
    ("orders@gw-1", LocalPublish("", "orders")),
    ("amqp$management@gw-1", ServiceRoute("amqp$management")),
    ("orders@remote", Forward("remote", "orders")),
    ("/queue/orders@gw-1", LocalPublish("", "orders")),
    ("/exchange/X/k@gw-1", LocalPublish("X", "k")),
    ("/exchange/X/k@remote", Forward("remote", "/exchange/X/k")),
    ("amqp$transfer", ServiceRoute("amqp$transfer")),
    (ExchangeAddress("X", "k"), LocalPublish("X", "k")),
])
def test_link_targets(address, route):
    assert link_target(address) == route


@pytest.mark.parametrize("address, route", [
    ("/exchange/X/rk", TemporaryBinding("X", "rk")),
    ("/exchange/X", TemporaryBinding("X", "")),
    ("/exchanges/X/rk", TemporaryBinding("X", "rk")),
    ("/topic/a.#", TemporaryBinding("amq.topic", "a.#")),
    ("/queue/q", LocalConsume("q")),
    ("/amq/queue/q", LocalConsume("q")),
    ("/queues/q", LocalConsume("q")),
    ("q", LocalConsume("q")),
    ("orders@gw-1", LocalConsume("orders")),
    ("amqp$management", ServiceRoute("amqp$management")),
    (QueueAddress("orders"), LocalConsume("orders")),
])
def test_sources(address, route):
    assert source(address) == route


@pytest.mark.parametrize("address, text", [
    ("/amq/queue/missing", "no queue 'missing' in this virtual host"),
    ("/queues/missing", "no queue 'missing' in this virtual host"),
    ("missing@gw-1", "no queue 'missing' in this virtual host"),
    ("/exchange/nope/rk", "no exchange 'nope' in this virtual host"),
    ("/exchange/nope", "no exchange 'nope' in this virtual host"),
    ("$management", "no service '$management' in this virtual host"),
])
def test_target_not_found(address, text):
    with pytest.raises(AddressError) as info:
        link_target(address)
    assert info.value.kind is AddressErrorKind.NOT_FOUND
    assert info.value.text == text


def test_not_found_names_vhost():
    with pytest.raises(AddressError) as info:
        resolve_source("/amq/queue/zzz", our_container=US, directory=DIR, vhost="/")
    assert info.value.text == "no queue 'zzz' in vhost '/'"


# ------------------------------------------------------------------ /queue/Q declares

@pytest.mark.parametrize("resolve, route", [
    (lambda a, d: resolve_link_target(a, our_container=US, directory=d), LocalPublish("", "new")),
    (lambda a, d: resolve_source(a, our_container=US, directory=d), LocalConsume("new")),
    (lambda a, d: resolve_target(a, our_container=US, directory=d), LocalPublish("", "new")),
], ids=["target", "source", "relayed-to"])
@pytest.mark.parametrize("address", ["/queue/new", "new"])
def test_queue_forms_declare_a_missing_queue(resolve, route, address):
    directory = FakeDirectory()
    assert resolve(address, directory) == route
    assert directory.declared == ["new"]


@pytest.mark.parametrize("address", ["/queue/q", "q", "/queue/orders"])
def test_an_existing_queue_is_not_declared_again(address):
    directory = FakeDirectory()
    link_target(address, directory)
    source(address, directory)
    assert directory.declared == []


@pytest.mark.parametrize("address", ["/amq/queue/new", "/queues/new", "new@gw-1"])
def test_other_queue_forms_never_declare(address):
    directory = FakeDirectory()
    for resolve in (link_target, source):
        with pytest.raises(AddressError) as info:
            resolve(address, directory)
        assert info.value.kind is AddressErrorKind.NOT_FOUND
    assert directory.declared == []


def test_subject_keyed_queue_target_never_declares():
    directory = FakeDirectory()
    assert resolve_target("/queue", our_container=US, directory=directory,
                          subject="new") == LocalPublish("", "new")
    assert directory.declared == []


def test_a_refused_declare_propagates_unchanged():
    with pytest.raises(Refused, match="configure access to resource 'new'"):
        link_target("/queue/new", RefusingDirectory())


def test_topic_needs_amq_topic():
    empty = FakeDirectory(exchanges={""})
    with pytest.raises(AddressError) as info:
        link_target("/topic/x", empty)
    assert info.value.text == "no exchange 'amq.topic' in this virtual host"


def test_forward_needs_transfer_service():
    no_transfer = FakeDirectory(services=set())
    with pytest.raises(AddressError) as info:
        link_target("orders@remote", no_transfer)
    assert info.value.kind is AddressErrorKind.NOT_FOUND
    assert "amqp$transfer" in info.value.text


def test_forward_to_a_container_without_a_route_is_not_found_naming_it():
    with pytest.raises(AddressError) as info:
        link_target("orders@unknown")
    assert info.value.kind is AddressErrorKind.NOT_FOUND
    assert info.value.text == "unknown container 'unknown': no forwarding route to it"


def test_source_from_remote_container_is_invalid():
    with pytest.raises(AddressError) as info:
        source("orders@remote")
    assert info.value.kind is AddressErrorKind.INVALID
    assert "remote container 'remote'" in info.value.text


def test_source_queue_without_name_is_invalid():
    with pytest.raises(AddressError) as info:
        source(QueueAddress(None))
    assert info.value.kind is AddressErrorKind.INVALID


def test_missing_source_queue():
    with pytest.raises(AddressError) as info:
        source("/queues/zzz")
    assert info.value.kind is AddressErrorKind.NOT_FOUND


@pytest.mark.parametrize("address, subject, route", [
    ("/exchange/X", "rk", LocalPublish("X", "rk")),
    ("/queue", "q", LocalPublish("", "q")),
    ("/queue", "not-a-queue", LocalPublish("", "not-a-queue")),  # broker decides
    ("/exchange/X/fixed", "ignored", LocalPublish("X", "fixed")),
    ("orders@remote", "ignored", Forward("remote", "orders")),
])
def test_resolve_target_with_subject(address, subject, route):
    assert resolve_target(address, our_container=US, directory=DIR, subject=subject) == route


@pytest.mark.parametrize("address", ["/exchange/X", "/queue"])
def test_subject_keyed_target_without_subject(address):
    with pytest.raises(AddressError) as info:
        resolve_target(address, our_container=US, directory=DIR)
    assert info.value.kind is AddressErrorKind.INVALID
    assert f"'{address}'" in info.value.text and "no subject" in info.value.text


def test_route_message():
    assert route_message(SubjectPublish("X"), "k") == LocalPublish("X", "k")
    assert route_message(LocalPublish("X", "k"), "other") == LocalPublish("X", "k")
    with pytest.raises(AddressError) as info:
        route_message(SubjectPublish("X"), "s" * 256)
    assert "longer than 255" in info.value.text
    with pytest.raises(TypeError):
        route_message(LocalConsume("q"), "k")  # type: ignore[arg-type]


def test_global_address_object_local_and_remote():
    assert link_target(GlobalAddress("q", US)) == LocalPublish("", "q")
    assert link_target(GlobalAddress("q", "remote")) == Forward("remote", "q")


def test_a_resolved_address_is_checked_again_each_time():
    """The parse of ``node@us`` is kept for the next message (issue 45); whether its
    queue exists is not: a queue deleted since is not found, one made since is found,
    and the same string for another container resolves for that one."""
    directory = FakeDirectory(queues={"fwd"}, remotes={"gw-1"})
    assert link_target("fwd@gw-1", directory) == LocalPublish("", "fwd")
    directory.queues.discard("fwd")
    with pytest.raises(AddressError) as err:
        link_target("fwd@gw-1", directory)
    assert err.value.kind is AddressErrorKind.NOT_FOUND
    directory.queues.add("fwd")
    assert link_target("fwd@gw-1", directory) == LocalPublish("", "fwd")
    assert resolve_link_target("fwd@gw-1", our_container="gw-2", directory=directory) == \
        Forward("gw-1", "fwd")
    assert source("/queue/fwd", directory) == LocalConsume("fwd")
    assert link_target("/queue/fwd", directory) == LocalPublish("", "fwd")


def test_a_message_target_resolved_before_is_checked_again_each_time():
    """``resolve_target`` keeps the queue route of an address string (one ``to`` per
    message on an ``amqp$transfer`` link), but only answers from it while the queue
    exists: a queue deleted since is not found, or declared again by an address that
    declares it; the same string for another container resolves for that one."""
    directory = FakeDirectory(queues={"fwd"}, remotes={"gw-1"})

    def target(address, container=US):
        return resolve_target(address, our_container=container, directory=directory)

    assert target("fwd@gw-1") == target("fwd@gw-1") == LocalPublish("", "fwd")
    directory.queues.discard("fwd")
    with pytest.raises(AddressError) as err:
        target("fwd@gw-1")
    assert err.value.kind is AddressErrorKind.NOT_FOUND
    assert target("fwd@gw-1", "gw-2") == Forward("gw-1", "fwd")
    assert target("/queue/new") == LocalPublish("", "new")
    directory.queues.discard("new")
    assert target("/queue/new") == LocalPublish("", "new")
    assert directory.declared == ["new", "new"]
