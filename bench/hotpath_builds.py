"""How ``bench/hotpath.py`` builds a gateway's parts, for today's tree and older ones.

The meter drives the engines the way ``gateway/service.py`` builds them. Older trees
(``--tree``, e.g. 446005f, before the store, forwarding and management) differ in a few
constructors; each difference is bridged here, by feature (what can be imported), so the
bench script itself stays one description of the paths. A part a tree does not have
raises :class:`NotInThisTree` and the path is reported missing.
"""
from __future__ import annotations

import queue
from typing import Any, Callable, Optional

__all__ = ["NotInThisTree", "Loop", "make_ledger", "make_store", "make_broker", "make_authenticator",
           "make_transfer", "channel_factory", "amqp10_factory", "amqp091_connection",
           "basic_properties", "Link", "management_scrape"]

USER, PASSWORD = "guest", "guest"


class NotInThisTree(Exception):
    """The checkout measured has no such part (e.g. no store before 446005f's successors)."""


def make_ledger(container: str) -> tuple[Any, Callable[[], Any]]:
    """The ledger the broker records into, and what takes its records for the writer
    (the gateway's default: a writer process, fed from this one)."""
    try:
        from gateway.ledger import Ledger  # noqa: PLC0415
    except ImportError:
        from gateway.ledger.feed import LedgerFeed  # noqa: PLC0415 - 446005f
        feed = LedgerFeed(container_id=container)
        return feed, lambda: feed.take_frame(0.0)
    ledger = Ledger(container_id=container)
    # before the writer process was sent frames, the gateway encoded JSON Lines itself
    take_one = getattr(ledger, "take_frame", None) or ledger.take_lines

    def take() -> None:
        while ledger.pending:
            take_one()

    return ledger, take


class Loop:
    """The reactor's part for the store: its commit thread's reports, run on this thread."""

    def __init__(self) -> None:
        self.reports: "queue.SimpleQueue[tuple[Callable[..., None], tuple]]" = queue.SimpleQueue()
        self.store: Any = None

    def call_in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        self.reports.put((fn, args))

    def run_reports(self, meter: Any) -> None:
        """Wait for the reports of everything flushed (not counted), then run them (counted)."""
        done: list[bool] = []
        self.store.after_commit(lambda error: done.append(True))
        while not done:
            fn, args = self.reports.get(timeout=30)
            meter.wrap(fn)(*args)


def make_store(directory: str, loop: Loop) -> Any:
    try:
        from gateway.store.sqlite import SqliteStore  # noqa: PLC0415
        from gateway.store_codecs import STORE_CODECS  # noqa: PLC0415
    except ImportError as exc:
        raise NotInThisTree("no SQLite store") from exc
    store = SqliteStore(f"{directory}/store.db", call_in_loop=loop.call_in_loop, codecs=STORE_CODECS,
                        sync="normal")
    loop.store = store
    return store


#: the first gateway id, as the service makes it (boot microseconds x 1000) for a boot
#: time fixed here: ids of eight octets, as a running gateway's are, for the paths whose
#: cost depends on it (a forwarded message carries its id)
FIRST_GATEWAY_ID = 1_750_000_000 * 1_000_000 * 1000


def make_broker(container: str, ledger: Any, store: Any) -> Any:
    import inspect  # noqa: PLC0415
    from gateway.broker import Broker  # noqa: PLC0415
    options: dict[str, Any] = dict(container_id=container, ledger=ledger)
    if "first_gateway_id" in inspect.signature(Broker).parameters:
        options["first_gateway_id"] = FIRST_GATEWAY_ID
    if store is not None:
        from gateway.store_codecs import load_stored_message  # noqa: PLC0415
        options.update(store=store, message_loader=load_stored_message)
    broker = Broker(**options)
    if store is not None:
        store.on_commit = broker.pager.relieve  # what the store driver does after a commit
    return broker


def make_authenticator() -> Any:
    from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password  # noqa: PLC0415
    everything = Permission(".*", ".*", ".*")
    users = UserDirectory([User(USER, hash_password(PASSWORD, iterations=4096),
                                tags=("administrator",), permissions={"/": everything})])
    return Authenticator(users)


def make_transfer(broker: Any, remotes: tuple[str, ...], loop: Loop, kind: str = "gateway") -> Any:
    """``amqp$transfer`` registered as the service does (every gateway has one), with a
    remote of ``kind`` for each name in ``remotes`` (``amqp091``: publishing to
    ``/queue/{node}``)."""
    try:
        from addressing import TRANSFER_SERVICE  # noqa: PLC0415
        from gateway.amqp10.payloads import container_from_transfer  # noqa: PLC0415
        from gateway.forward.outbound import RemoteSettings  # noqa: PLC0415
        from gateway.forward.settings import ForwardingSettings  # noqa: PLC0415
        from gateway.forward.transfer import TransferService  # noqa: PLC0415
    except ImportError:
        if remotes:
            raise NotInThisTree("no forwarding") from None
        return None
    settings = ForwardingSettings(remotes=tuple(
        RemoteSettings(r, "127.0.0.1", user=USER, credit=500, kind=kind,
                       address="/queue/{node}" if kind == "amqp091" else "") for r in remotes))
    transfer = TransferService(broker, settings, lambda: 0.0,
                               from_amqp10=lambda encoded, now: container_from_transfer(encoded, now)[0])
    broker.register_service(TRANSFER_SERVICE, transfer)
    broker.register_service_resolver(transfer.resolve)
    transfer.restore(0.0)
    return transfer


def channel_factory(broker: Any) -> Any:
    from gateway.amqp091.channel import BrokerChannel  # noqa: PLC0415
    return BrokerChannel.factory(broker)


def amqp10_factory(broker: Any, authenticator: Any, container: str) -> Callable[[bytes], Any]:
    from tests.support.amqp10_pump import engine_factory  # noqa: PLC0415
    return engine_factory(broker, authenticator, container_id=container)


def amqp091_connection(broker: Any, authenticator: Any, factory: Any) -> Any:
    from gateway.amqp091.connection import ServerConnection  # noqa: PLC0415
    return ServerConnection(authenticator=authenticator, broker=broker, channel_handler_factory=factory,
                            peer_host="127.0.0.1", now=0.0)


def basic_properties(**fields: Any) -> Any:
    from translators.basic_properties import BasicProperties  # noqa: PLC0415
    return BasicProperties(**fields)


class Link:
    """org-a's outbound connection to org-b's engine, in memory: bytes move both ways on
    ``pump``; each side counted by its gateway's meter. The remote's ``kind`` says which:
    ``gateway``, a 1.0 link to org-b's ``amqp$transfer``; ``amqp091``, our 0-9-1 client
    publishing with confirms to org-b's 0-9-1 engine."""

    def __init__(self, a: Any, b: Any, remote: str) -> None:
        from hotpath import Edge  # noqa: PLC0415
        forwarder = a.transfer.forwarders[remote]
        self._deferred: list[Callable[[], None]] = []
        forwarder.defer = self._deferred.append
        self.a_meter, self.b_meter = a.meter, b.meter
        settings = forwarder.settings
        if settings.kind == "amqp091":
            from gateway.amqp091.outbound_client import OutboundAmqp091 as Outbound  # noqa: PLC0415
            self._b_factory = lambda header: Edge(amqp091_connection(b.broker, b.auth, b.channel_factory),
                                                  b.meter)
        else:
            from gateway.amqp10.outbound_client import OutboundAmqp10 as Outbound  # noqa: PLC0415
            self._b_factory = lambda header: Edge(b.amqp10_factory(header), b.meter)
        client = Outbound(settings, PASSWORD, a.container, forwarder)
        forwarder.connection = client
        forwarder.connecting()
        self.client = Edge(client, a.meter)
        self.server: Any = None
        #: the client's output of its last read, for the next round
        self._pending = b""

    def pump(self) -> None:
        for _ in range(10000):
            moved = False
            while self._deferred:
                self.a_meter.wrap(self._deferred.pop(0))()
                moved = True
            out = self.client.flush() if self.client.flush_wanted or self.server is None else b""
            out += self._pending
            self._pending = b""
            if out and self.server is None:
                self.server = self._b_factory(out[:8])
                out = out[8:]
                back = self.server.flush()
            else:
                back = b""
            if out:
                back += self.server.data_received(out)
                moved = True
            elif self.server is not None and self.server.flush_wanted:
                back += self.server.flush()
            if back:
                self._pending = self.client.data_received(back)
                moved = True
            if not moved:
                return
        raise AssertionError("the forwarding link did not settle")


def management_scrape(broker: Any, authenticator: Any) -> Callable[[], list]:
    """``GET /api/queues`` as the management site answers it (without the socket)."""
    try:
        from gateway.auth import ConnectionRegistry  # noqa: PLC0415
        from gateway.management import ManagementModel  # noqa: PLC0415
        from gateway.management.http_api import ApiRequest, HttpApi, handle  # noqa: PLC0415
    except ImportError as exc:
        raise NotInThisTree("no management API") from exc
    model = ManagementModel(broker, ConnectionRegistry(), authenticator, clock=lambda: 0.0)
    api = HttpApi(model, lambda: {"enabled": False}, started_at=0.0)
    user = authenticator.users.get(USER)

    def scrape() -> list:
        return handle(api, ApiRequest("GET", ("api", "queues"), user=user)).body

    return scrape


def close_store(store: Optional[Any]) -> None:
    if store is not None:
        store.close()
