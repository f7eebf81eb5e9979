"""Build the appliance from a config: broker, users, engines, listeners, HTTP, systemd.

``GatewayService`` is the one place where the sans-I/O core meets Twisted. It owns no
module globals, so tests may run several gateways in one process.
"""
from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any, Mapping, Optional

from twisted.application import service
from twisted.internet import defer, task

# Both engines are imported here, at start-up: imported on the first connection of each
# protocol they made that connection wait a fifth of a second.
from gateway.amqp091 import ServerConnection
from gateway.amqp091.backend_bridge import BackendBridge
from gateway.amqp10.backend_client import BackendLinkClient
from gateway.amqp091.channel import BrokerChannel
from gateway.amqp091.spec import ProtocolVersion
from addressing import TRANSFER_SERVICE
from gateway.amqp10 import Amqp10Engine
from gateway.amqp10.payloads import container_from_transfer
from gateway.auth import (
    Authenticator,
    ConnectionRegistry,
    ListenerAdmission,
    OfferedMechanisms,
    LoginThrottle,
    Permission,
    User,
    UserDirectory,
    UserLimits,
)
from gateway.backend.nodes import Backends
from gateway.broker import Broker
from gateway.config import (ConfigError, GatewayConfig, ListenerConfig, StoreConfig, TlsMode,
                            UserConfig, load_config)
from gateway.connection_log import RateLimitedLog
from gateway import timeline
from gateway.edge.http import make_site
from gateway.edge.ledger_outlet import LedgerOutlet
from gateway.edge.listener import AcceptedConnection, ListenerFactory, listener_endpoint, server_endpoint
from gateway.edge.store_driver import StoreDriver
from gateway.edge.listener_facts import listener_facts
from gateway.edge.management_http import make_management_site
from gateway.edge.backend import EdgeProxy
from gateway.edge.process_memory import resident_bytes
from gateway.edge.outbound import ForwardingEdge
from gateway.forward.status import ForwardingStatus
from gateway.edge.ports import AMQP_LISTENER, MANAGEMENT_ENDPOINT, METRICS_ENDPOINT, listen_on
from gateway.edge.systemd import SystemdNotifier, Watchdog
from gateway.edge.workers import ReusePortEndpoint, WorkerPlace
from gateway.forward.transfer import TransferService
from gateway.edge.tls import DEFAULT_CIPHERS, TlsServer, TlsSettings
from gateway.management.alerts import LEDGER_GAP, QueueThresholds, ThresholdRule
from gateway.management.definitions import Definitions
from gateway.management.rate_history import RateHistory
from gateway.management.remote_alerts import RemoteThresholds
from gateway.management.gateway_management import GatewayManagement
from gateway.management.http_api import HttpApi
from gateway.management.api_facts import HealthFacts
from gateway.metrics import GatewayMetrics
from gateway.product import API_RABBITMQ_VERSION, product_properties
from gateway.protocol_header import HeaderKind
from gateway.store import NullStore
from gateway.store.sqlite import SqliteStore
from gateway.store_codecs import MANAGEMENT_MESSAGES, STORE_CODECS, load_stored_message

log = logging.getLogger(__name__)

__all__ = ["GatewayService", "users_from_config", "tls_server_for"]

BROKER_TICK_INTERVAL = 1.0
#: seconds between the timeline's samples of outbox and queue depths
TIMELINE_SAMPLE_INTERVAL = 0.02


def users_from_config(users: tuple[UserConfig, ...]) -> list[User]:
    return [
        User(name=u.name, password_hash=u.password_hash, tags=u.tags,
             loopback_only=u.loopback_only,
             permissions={vh: Permission(p.configure, p.write, p.read)
                          for vh, p in u.permissions.items()})
        for u in users
    ]


def first_gateway_id(boot_time: float) -> int:
    """Gateway ids start at boot microseconds x 1000: a restart always starts above every
    id the previous run could have given out (up to 1000 messages per microsecond)."""
    return int(boot_time * 1_000_000) * 1000


def store_path(config: GatewayConfig) -> str:
    return config.store.path or os.path.join(config.state_dir, "store.db")


def memory_budget(config: GatewayConfig) -> int:
    """``store.memory_budget``, or half the memory high watermark (RabbitMQ's paging
    ratio of 0.5)."""
    return config.store.memory_budget or config.memory_high_watermark // 2


def user_limits(users: tuple[UserConfig, ...]) -> dict[str, UserLimits]:
    return {u.name: UserLimits(u.max_connections, u.max_channels) for u in users}


def tls_server_for(listener: ListenerConfig) -> Optional[TlsServer]:
    """The listener's TLS material, loaded now (raises ``TlsError`` naming the file)."""
    if listener.tls is TlsMode.OFF:
        return None
    return TlsServer(TlsSettings(
        cert_file=listener.tls_cert_file or "", key_file=listener.tls_key_file or "",
        ca_file=listener.tls_ca_file, verify_client=listener.tls_verify_client,
        min_version=listener.tls_min_version, ciphers=listener.tls_ciphers or DEFAULT_CIPHERS,
        sni=tuple((c.server_name, c.cert_file, c.key_file) for c in listener.tls_sni)))


class GatewayService(service.MultiService):
    """``worker``: this gateway is one worker of ``workers: N`` (``edge.workers``): its
    AMQP ports are shared (``SO_REUSEPORT``), its HTTP on unix sockets for the parent."""

    def __init__(self, config: GatewayConfig, reactor, environ: Mapping[str, str] | None = None,
                 worker: Optional[WorkerPlace] = None) -> None:
        super().__init__()
        self.config = config
        self.reactor = reactor
        self.worker = worker
        self.container_id = config.container_id or f"amqp-gateway.{socket.gethostname()}"
        self.metrics = GatewayMetrics()
        #: the bench's event timeline (off unless the environment names its file)
        self.timeline = timeline.install(os.environ if environ is None else environ, time.monotonic)
        #: the ledger, and its writer (a child process, or in this process)
        self.ledger_outlet = LedgerOutlet(config, reactor, self.container_id, self.metrics, self._ledger_gap)
        self.ledger = self.ledger_outlet.ledger
        self.store = self._make_store(config.store)  # raises StoreUnusable: exit status 2
        self.broker = Broker(container_id=self.container_id, vhosts=config.local_vhosts,
                             memory_high_watermark=config.memory_high_watermark,
                             memory_low_watermark_ratio=config.memory_low_watermark_ratio,
                             ledger=self.ledger if self.ledger.enabled else None,
                             first_gateway_id=first_gateway_id(reactor.seconds()),
                             store=self.store, message_loader=load_stored_message,
                             memory_budget=memory_budget(config))
        self.users = UserDirectory()
        #: users, vhosts, permissions, policies and limits changed at run time, in effect
        #: before the broker restores its queues (they come back with their policies)
        self.definitions = Definitions(self.broker, self.users, users_from_config(config.users),
                                       config.local_vhosts, self.store, reactor.seconds,
                                       proxied=[v.name for v in config.vhosts if v.backend])
        try:
            self.definitions.load()
        except BaseException:
            self.store.close()
            raise
        self.store_driver: Optional[StoreDriver] = None
        if self.store.persistent:
            sc = config.store
            self.store_driver = StoreDriver(
                reactor, self.store, self.broker.gate, self.broker.pager,
                commit_interval=sc.commit_interval, disk_free_limit=sc.disk_free_limit,
                disk_check_interval=sc.disk_check_interval)
            if self.ledger_outlet.process is not None:  # acknowledged means recorded
                self.store.before_confirming = self.ledger_outlet.ship_now
            self._restore()
            driver = self.store_driver
            self.metrics.watch_store(self.store, self.broker, lambda: driver.free_bytes)
        self.metrics.watch_broker(self.broker, reactor.seconds)
        self.metrics.watch_conversions()
        self.transfer = self._make_transfer(config)
        self.forwarding = ForwardingEdge(reactor, self.transfer, self.container_id,
                                         shovel_vhost=self.broker.vhost(config.local_vhosts[0] if config.local_vhosts else "/"))
        self.metrics.watch_forwarding(self.transfer.status)
        #: edge mode: the backends of proxied vhosts and the proxy the engines open them with
        self.backends = Backends(config.backends, {v.name: v.backend for v in config.vhosts if v.backend})
        self.vhost_proxy = (EdgeProxy(reactor, self.backends, BackendBridge, BackendLinkClient) if self.backends.proxied
                            else None)
        if self.backends.proxied:
            self.metrics.watch_backends(self.backends.status)
        self.authenticator = Authenticator(self.users, anonymous_user=config.amqp10.default_user,
                                           passthrough=self.backends.passthrough)
        limits = config.limits
        # shared by both engines: a user's connections count across protocols/listeners
        self.connection_registry = ConnectionRegistry(
            default_max_connections=limits.max_connections_per_user,
            per_user=user_limits(config.users), vhost_limit=self._vhost_connection_limit)
        alerts = config.management.alerts
        #: the management nodes, events and alerts, around the model
        self.management_plane = GatewayManagement(
            self.broker, self.connection_registry, self.authenticator, self.users, clock=reactor.seconds,
            forwarding=ForwardingStatus(self.transfer, self.forwarding.shovels),
            thresholds=QueueThresholds(alerts.queue_depth, alerts.queue_age),
            rules=[ThresholdRule(q.pattern, q.queue_depth, q.queue_age) for q in alerts.queues],
            remote_thresholds=RemoteThresholds(alerts.remote_outbox_depth, alerts.remote_down_time),
            backends=self.backends if self.backends.proxied else None)
        #: management's one model over the broker (``gateway.management.model``)
        self.management = self.management_plane.model
        events = self.management_plane.events
        self.transfer.on_dead_letter = lambda dead: events.emit("forward.dead_lettered",
                                                                dead["vhost"], dead)
        self.metrics.watch_alerts(self.management_plane.alerts, self.management_plane.remotes)
        #: the one rate limit of log lines peers cause (handshake timeouts, throttled logins)
        self.connection_log = RateLimitedLog(interval=config.logging.summary_interval)
        self.login_throttle = LoginThrottle(
            max_failures=limits.failed_logins_before_delay, window=limits.failed_login_window,
            base_delay=min(limits.failed_login_base_delay, limits.failed_login_max_delay),
            max_delay=limits.failed_login_max_delay, max_pending=limits.failed_login_max_pending,
            log_limit=self.connection_log)
        self.notifier = SystemdNotifier(environ)
        self.watchdog = Watchdog(self.notifier)
        self.tls_servers = [tls_server_for(listener) for listener in config.listeners]
        self.factories: list[ListenerFactory] = []
        self.ports: list = []
        self.http_port = None
        self.management_port = None
        self._broker_tick: Optional[task.LoopingCall] = None
        #: the dashboard's rate history, sampled on its own timer (never per message)
        self.rate_history = RateHistory(self.management.message_totals,
                                        interval=config.management.sample_interval)
        self._rate_sampling: Optional[task.LoopingCall] = None
        self._depth_sampling: Optional[task.LoopingCall] = None
        self._stopping: Optional[defer.Deferred] = None

    def _vhost_connection_limit(self, name: str) -> Optional[int]:
        """The vhost's ``max-connections`` (management's vhost limits), None for none."""
        vhost = self.broker.vhost(name)
        return vhost.limits.max_connections if vhost is not None else None

    def _ledger_gap(self, count: int, since: float, now: float) -> None:
        """The writer process died with ``count`` records unwritten since ``since``: a
        ``gap`` record (in the next writer's ledger), an alert, and the metric."""
        self.ledger.gap(now, count, since)
        self.management_plane.alerts.raised_once(
            LEDGER_GAP, {"records_lost": count, "since": since, "container": self.container_id},
            f"the ledger writer process died; {count} record(s) made since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(since))} UTC could not be written")

    def _make_store(self, sc: StoreConfig) -> SqliteStore | NullStore:
        if not sc.enabled:
            return NullStore()
        path = store_path(self.config)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return SqliteStore(path, call_in_loop=self.reactor.callFromThread, codecs=STORE_CODECS,
                           sync=sc.sync_mode, check=sc.integrity_check, batch_max=sc.commit_batch,
                           reserve_bytes=sc.disk_reserve)

    def _restore(self) -> None:
        """Rebuild what the store holds, before any listener opens; messages that expired
        meanwhile go by the usual rules (the broker is ticked once)."""
        started = time.monotonic()
        try:
            counts = self.broker.restore(self.reactor.seconds())
        except BaseException:
            self.store.close()
            raise
        self.broker.tick(self.reactor.seconds())
        took = time.monotonic() - started
        for vhost, c in sorted(counts.items()):
            log.info("restored vhost '%s' from %s: %d exchange(s), %d queue(s), %d binding(s), "
                     "%d message(s) (%d redelivered) in %.3fs", vhost, store_path(self.config),
                     c.exchanges, c.queues, c.bindings, c.messages, c.redelivered, took)

    def _make_transfer(self, config: GatewayConfig) -> TransferService:
        """``amqp$transfer`` (always: a gateway with no remotes still takes in what others
        forward to it), its outbox restored from the store."""
        transfer = TransferService(self.broker, config.forwarding, self.reactor.seconds,
                                   log_interval=config.logging.summary_interval,
                                   dead_letter_vhost=config.local_vhosts[0] if config.local_vhosts else "/",
                                   from_amqp10=lambda encoded, now: container_from_transfer(
                                       encoded, now)[0])
        self.broker.register_service(TRANSFER_SERVICE, transfer)
        self.broker.register_service_resolver(transfer.resolve)
        restored = transfer.restore(self.reactor.seconds())
        if restored:
            log.info("restored %d message(s) waiting to be forwarded", restored)
        return transfer

    # -- engines ------------------------------------------------------------------
    def make_engine(self, ctx: AcceptedConnection) -> object:
        """Build the engine for a recognised header (called by the sniffer)."""
        limits = self.config.limits
        authenticator = self.authenticator
        if ctx.listener.mechanisms:
            authenticator = OfferedMechanisms(self.authenticator, ctx.listener.mechanisms)
        # the user's limits as usual, plus the listener's cap: both refused at open with
        # the protocol's error (530 / amqp:resource-limit-exceeded) naming the limit
        registry = self.connection_registry
        if ctx.listener_slots is not None:
            registry = ListenerAdmission(registry, ctx.listener_slots)
        if ctx.kind.is_amqp091:
            return ServerConnection(
                authenticator=authenticator, broker=self.broker, peer_host=ctx.peer_host,
                now=ctx.now, frame_max=limits.frame_max, channel_max=limits.channel_max,
                heartbeat=limits.heartbeat, max_message_size=limits.max_message_size,
                handshake_timeout=limits.handshake_timeout, close_timeout=limits.close_timeout,
                protocol_version=(ProtocolVersion.AMQP_0_9 if ctx.kind is HeaderKind.AMQP09
                                  else ProtocolVersion.AMQP_0_9_1),
                allow_anonymous=ctx.listener.allow_anonymous,
                tls_peer_subject=ctx.tls_peer_subject,
                channel_handler_factory=BrokerChannel.factory(self.broker),
                connection_id=ctx.connection_id, peer_port=ctx.peer_port,
                connection_registry=registry, login_throttle=self.login_throttle, tls=ctx.tls,
                trail=ctx.trail, server_properties=product_properties(self.config.rabbitmq_version),
                vhost_proxy=self.vhost_proxy)
        amqp10 = self.config.amqp10
        return Amqp10Engine(
            header=ctx.header, broker=self.broker, authenticator=authenticator,
            peer_host=ctx.peer_host, now=ctx.now, container_id=self.container_id,
            allow_anonymous=ctx.listener.allow_anonymous, anonymous_user=amqp10.default_user,
            default_user=amqp10.default_user,
            default_vhost=ctx.listener.default_vhost or amqp10.default_vhost,
            max_frame_size=limits.frame_max or 131072, channel_max=limits.channel_max or 65535,
            idle_timeout=float(limits.heartbeat), max_message_size=limits.max_message_size,
            handshake_timeout=limits.handshake_timeout, tls_peer_subject=ctx.tls_peer_subject,
            connection_id=ctx.connection_id, peer_port=ctx.peer_port,
            connection_registry=registry, login_throttle=self.login_throttle,
            max_links=limits.max_links_per_connection, unroutable=amqp10.unroutable, tls=ctx.tls,
            rabbitmq_version=self.config.rabbitmq_version, trail=ctx.trail,
            allow_without_sasl=ctx.listener.allow_amqp10_without_sasl, vhost_proxy=self.vhost_proxy)

    # -- start ----------------------------------------------------------------------
    @defer.inlineCallbacks
    def start(self):
        """Bind every listener and the HTTP endpoint, then tell systemd we are ready."""
        super().startService()
        self.metrics.started(self.reactor.seconds())
        for i, (listener, tls) in enumerate(zip(self.config.listeners, self.tls_servers)):
            factory = ListenerFactory(listener, self.reactor, self.metrics, self.make_engine,
                                      max_connections=self.config.limits.max_connections, tls=tls,
                                      connection_log=self.connection_log,
                                      close_linger=self.config.limits.close_linger)
            endpoint = (ReusePortEndpoint(self.reactor, listener.host, listener.port, listener.backlog)
                        if self.worker else listener_endpoint(self.reactor, listener))
            port = yield listen_on(endpoint, factory.wrap_for_tls(),
                                   AMQP_LISTENER, listener.host, listener.port, f"listeners[{i}].port")
            self.factories.append(factory)
            self.ports.append(port)
            addr = port.getHost()
            self.metrics.listening("amqp", addr.host, addr.port, listener.tls.value)
            log.info("listening on %s:%d (AMQP 0-9-1, 0-9 and 1.0; tls %s; backlog %d)", addr.host,
                     addr.port, listener.tls.value, listener.backlog)
        m = self.config.metrics
        if m.enabled and self.worker:
            self.http_port = yield self._listen_for_parent("metrics", make_site(self.metrics, m.path))
        elif m.enabled:
            self.http_port = yield listen_on(server_endpoint(self.reactor, m.host, m.port),
                                             make_site(self.metrics, m.path), METRICS_ENDPOINT,
                                             m.host, m.port, "metrics.port")
            addr = self.http_port.getHost()
            self.metrics.listening("metrics", addr.host, addr.port, "off")
            log.info("metrics on http://%s:%d%s", addr.host, addr.port, m.path)
        mg = self.config.management
        if mg.enabled:
            health = HealthFacts(
                lambda: listener_facts(zip(self.config.listeners, self.ports), self.http_port,
                                       self.management_port),
                lambda: len(self.connection_registry), self.config.limits.max_connections,
                self.reactor.seconds)
            api = HttpApi(self.management, self.ledger_outlet.status, started_at=self.reactor.seconds(),
                          rabbitmq_version=self.config.rabbitmq_version or API_RABBITMQ_VERSION,
                          process_memory=resident_bytes, definitions=self.definitions,
                          messages=MANAGEMENT_MESSAGES, health=health, rates=self.rate_history)
            self._rate_sampling = task.LoopingCall(self._sample_rates)
            self._rate_sampling.clock = self.reactor
            self._rate_sampling.start(self.rate_history.interval, now=True)
            site = make_management_site(api, self.authenticator, self.login_throttle, self.reactor.seconds)
        if mg.enabled and self.worker:
            self.management_port = yield self._listen_for_parent("management", site)
        elif mg.enabled:
            self.management_port = yield listen_on(
                server_endpoint(self.reactor, mg.host, mg.port), site, MANAGEMENT_ENDPOINT,
                mg.host, mg.port, "management.port")
            addr = self.management_port.getHost()
            self.metrics.listening("management", addr.host, addr.port, "off")
            log.info("management API on http://%s:%d/api (dashboard at /)", addr.host, addr.port)
        self._broker_tick = task.LoopingCall(self._tick_broker)
        self._broker_tick.clock = self.reactor
        self._broker_tick.start(BROKER_TICK_INTERVAL, now=False)
        if self.timeline is not None:  # where the messages wait, every 20 ms (a bench's picture)
            self._depth_sampling = task.LoopingCall(self._sample_depths)
            self._depth_sampling.clock = self.reactor
            self._depth_sampling.start(TIMELINE_SAMPLE_INTERVAL, now=False)
        if self.store_driver is not None:
            self.store_driver.start()
        self.ledger_outlet.start()
        self.forwarding.start()
        self.notifier.ready(f"listening on {len(self.ports)} address(es)")
        self.watchdog.start()
        log.info("gateway %s ready", self.container_id)

    def _listen_for_parent(self, serves: str, site) -> defer.Deferred:
        """A worker's HTTP (``serves``: metrics, management) on its unix socket, which
        the parent serves merged with the other workers' (``edge.worker_http``)."""
        from twisted.internet.endpoints import UNIXServerEndpoint

        path = self.worker.socket_path(serves)  # type: ignore[union-attr]
        if os.path.exists(path):
            os.unlink(path)  # left by this worker's previous life
        log.info("%s for the supervisor on unix:%s", serves, path)
        return UNIXServerEndpoint(self.reactor, path).listen(site)

    def _sample_depths(self) -> None:
        """The bench's picture of where forwarded messages wait (``gateway.timeline``):
        each remote's outbox (staged for its commit, ready to send, in flight) and the
        remote's credit, and the messages ready and unacknowledged in local queues."""
        try:
            self._mark_depths(self.timeline)
        except Exception:  # noqa: BLE001 - a timer must never stop the reactor
            log.exception("sampling the depths for the timeline failed")

    def _mark_depths(self, marks: Any) -> None:
        for forwarder in self.transfer.forwarders.values():
            marks.mark("depth-staged", forwarder.staged)
            marks.mark("depth-ready", forwarder.unsent - forwarder.staged)
            marks.mark("depth-in-flight", len(forwarder.in_flight))
            marks.mark("depth-credit", forwarder.remote_credit)
        ready = unacked = 0
        for vhost in self.broker.vhosts.values():
            for queue in vhost.queues.values():
                ready += queue.message_count
                unacked += queue.acquired_count
        marks.mark("depth-queued", ready)
        marks.mark("depth-unacked", unacked)

    def _sample_rates(self) -> None:
        try:
            self.rate_history.sample(self.reactor.seconds())
        except Exception:  # noqa: BLE001 - a timer must never stop the reactor
            log.exception("sampling the rate history failed")

    def _tick_broker(self) -> None:
        now = self.reactor.seconds()
        try:
            self.broker.tick(now)
            self.transfer.tick(now)
            self.management_plane.tick(now)
            self.connection_log.flush(now)  # the count of lines a burst left out
        except Exception:  # noqa: BLE001 - a timer must never stop the reactor
            log.exception("broker tick failed")

    # -- stop -------------------------------------------------------------------------
    def stop(self) -> defer.Deferred:
        """Stop accepting, close every connection properly, give up after the timeout."""
        if self._stopping is None:
            self._stopping = defer.ensureDeferred(self._stop())
        return self._stopping

    async def _stop(self) -> None:
        log.info("shutting down: no new connections, closing open ones")
        self.notifier.stopping()
        self.watchdog.stop()
        if self._broker_tick is not None and self._broker_tick.running:
            self._broker_tick.stop()
        await defer.gatherResults([defer.maybeDeferred(p.stopListening) for p in self.ports])
        drained = defer.gatherResults([f.drain("shutdown") for f in self.factories],
                                      consumeErrors=True)
        timeout = self.config.shutdown_timeout
        drained.addTimeout(timeout, self.reactor)
        try:
            await drained
        except (defer.TimeoutError, defer.CancelledError, defer.FirstError):
            log.warning("connections still open after %.1fs; aborting them", timeout)
            for f in self.factories:
                f.abort_all()
        # what the store does not keep ends here: the ledger says so
        self.broker.record_shutdown(self.reactor.seconds())
        self.forwarding.stop()
        if self.store_driver is not None:
            self.store_driver.stop()
        self.store.close()  # commits what the connections left
        if self.timeline is not None:
            self.timeline.write()
        if self._rate_sampling is not None and self._rate_sampling.running:
            self._rate_sampling.stop()
        if self._depth_sampling is not None and self._depth_sampling.running:
            self._depth_sampling.stop()
        await self.ledger_outlet.stop(self.config.shutdown_timeout)
        for http in (self.http_port, self.management_port):
            if http is not None:
                await defer.maybeDeferred(http.stopListening)
        if self.running:
            await defer.maybeDeferred(super().stopService)
        log.info("stopped")

    def reload(self) -> None:
        """SIGHUP: re-read TLS material, users and ``store.disk_free_limit``; established
        connections stay up.

        Anything that fails to load keeps the previous material and is logged."""
        self.notifier.reloading()
        log.info("SIGHUP received: reloading TLS material and users")
        for tls in self.tls_servers:
            if tls is not None:
                tls.reload()
        if self.config.source:
            try:
                fresh = load_config(self.config.source)
                self.definitions.users.rebase(users_from_config(fresh.users))
                self.connection_registry.replace_limits(user_limits(fresh.users))
                log.info("users reloaded: %d user(s)", len(self.users))
                if self.store_driver is not None:
                    self.store_driver.disk_free_limit = fresh.store.disk_free_limit
                    self.store_driver.check_disk()
            except (ConfigError, ValueError) as exc:
                log.error("users not reloaded, keeping the previous ones: %s", exc)
        self.notifier.notify("READY=1")

    def bound_addresses(self) -> list[tuple[str, int]]:
        return [(p.getHost().host, p.getHost().port) for p in self.ports]
