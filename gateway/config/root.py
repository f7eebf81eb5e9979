"""The whole file: ``GatewayConfig``, one field per top-level key, and the command-line overrides."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from gateway.config.checks import checked, existing_file_problem, fraction_problem, positive_problem, version_text_problem
from gateway.config.listeners import ListenerConfig
from gateway.config.monitoring import LoggingConfig, ManagementConfig, MetricsConfig
from gateway.config.protocols import Amqp10Config, LimitsConfig
from gateway.config.storage import LedgerConfig, StoreConfig
from gateway.config.users import UserConfig
from gateway.config.workers import Workers, workers_value_problem
from gateway.backend.settings import BackendSettings
from gateway.forward.settings import ForwardingSettings


@dataclass(frozen=True, slots=True)
class VhostConfig:
    """One ``vhosts[]`` entry: a bare name (a local vhost of the embedded broker), or a
    mapping with ``name`` and ``backend`` (a proxied vhost: edge mode)."""

    #: the key a bare scalar in the list stands for (the schema walker reads it)
    SCALAR_KEY = "name"

    name: str
    backend: str = ""


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    container_id: str = checked("", check=lambda v: "a container id must not contain '@' "
                                 "(it would make node@container ambiguous)" if "@" in v else None)
    state_dir: str = "var"
    listeners: tuple[ListenerConfig, ...] = (ListenerConfig(),)
    metrics: MetricsConfig = MetricsConfig()
    management: ManagementConfig = ManagementConfig()
    vhosts: tuple[VhostConfig, ...] = (VhostConfig("/"),)
    users: tuple[UserConfig, ...] = ()
    users_file: Optional[str] = checked(None, check=existing_file_problem)
    amqp10: Amqp10Config = Amqp10Config()
    #: "" or a version such as "4.1.0": both protocols then announce product RabbitMQ with
    #: this version (``gateway.product``); ``amqp10.rabbitmq_version`` is its old name
    rabbitmq_version: str = checked("", check=version_text_problem)
    limits: LimitsConfig = LimitsConfig()
    memory_high_watermark: int = checked(1073741824, check=positive_problem)
    memory_low_watermark_ratio: float = checked(0.9, check=fraction_problem)
    shutdown_timeout: float = checked(10.0, check=positive_problem)
    # gateway processes sharing the listening ports (gateway/config/workers.py)
    workers: Workers = checked(1, check=workers_value_problem)
    ledger: LedgerConfig = LedgerConfig()
    store: StoreConfig = StoreConfig()
    logging: LoggingConfig = LoggingConfig()
    forwarding: ForwardingSettings = ForwardingSettings()
    backends: tuple[BackendSettings, ...] = ()
    management: ManagementConfig = ManagementConfig()
    # set by the loader, not keys of the file (``schema_walker.LOADER_FIELDS``)
    source: str = ""
    #: what ``check-config`` warns of and ``run`` logs: deprecated keys in use
    warnings: tuple[str, ...] = ()

    @property
    def vhost_names(self) -> tuple[str, ...]:
        """Every vhost's name, local and proxied, in config order."""
        return tuple(v.name for v in self.vhosts)

    @property
    def local_vhosts(self) -> tuple[str, ...]:
        """The vhosts of the embedded broker (those with no ``backend``)."""
        return tuple(v.name for v in self.vhosts if not v.backend)

    def backend_of(self, vhost: str) -> "BackendSettings | None":
        """The backend a proxied ``vhost`` lives in, or None for a local one."""
        for v in self.vhosts:
            if v.name == vhost and v.backend:
                return next((b for b in self.backends if b.name == v.backend), None)
        return None

    def with_overrides(self, *, listen: list[tuple[str, int]] | None = None,
                       metrics: tuple[str, int] | None = None,
                       management: tuple[str, int] | None = None) -> "GatewayConfig":
        """Apply ``--listen``/``--metrics``/``--management``: each ``--listen`` replaces the listener list
        (the first configured listener's other settings are kept as the template)."""
        cfg = self
        if listen:
            template = self.listeners[0] if self.listeners else ListenerConfig()
            cfg = dataclasses.replace(cfg, listeners=tuple(
                dataclasses.replace(template, host=h, port=p, name=f"{h}:{p}") for h, p in listen))
        if metrics:
            cfg = dataclasses.replace(cfg, metrics=dataclasses.replace(
                cfg.metrics, enabled=True, host=metrics[0], port=metrics[1]))
        if management:
            cfg = dataclasses.replace(cfg, management=dataclasses.replace(
                cfg.management, enabled=True, host=management[0], port=management[1]))
        return cfg
