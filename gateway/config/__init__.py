"""The gateway's one YAML file, loaded into frozen dataclasses.

Why a schema walker instead of ``yaml.safe_load`` + ad-hoc checks: every error must name
the key path and the line (``listeners[0].port`` at line 12), and every key must be
known; PyYAML's node tree keeps the line marks, so the dataclasses *are* the schema
(type hints give the type, ``metadata["check"]`` adds value checks, defaults are the
documented defaults of ``config.example.yaml``). Nothing here touches the network; the
edge checks that endpoints can be built (``check-config``).

Where things are: ``loading`` reads the file, ``schema_walker`` turns the YAML nodes into
the dataclasses, ``checks`` holds the value checks; one module per group of sections
(``listeners``, ``users``, ``protocols``, ``storage``, ``monitoring``; ``forwarding:`` is
``gateway.forward.settings``), and ``root`` the top level, ``GatewayConfig``.
"""
from gateway.config.checks import directory_problem
from gateway.config.errors import ConfigError
from gateway.config.listeners import ListenerConfig, SniCertificate, TlsMode, client_host, parse_host_port
from gateway.config.loading import CONFIG_ENV, line_of, load_config, load_config_text, load_users_file
from gateway.config.monitoring import (
    AlertsConfig, LoggingConfig, ManagementConfig, MetricsConfig, QueueAlertConfig,
)
from gateway.config.protocols import Amqp10Config, LimitsConfig
from gateway.config.root import GatewayConfig, VhostConfig
from gateway.config.storage import LedgerConfig, StoreConfig
from gateway.config.users import PermissionConfig, UserConfig

__all__ = [
    "ConfigError",
    "TlsMode",
    "ListenerConfig",
    "SniCertificate",
    "MetricsConfig",
    "ManagementConfig",
    "PermissionConfig",
    "UserConfig",
    "Amqp10Config",
    "LimitsConfig",
    "LedgerConfig",
    "StoreConfig",
    "LoggingConfig",
    "AlertsConfig",
    "QueueAlertConfig",
    "GatewayConfig",
    "VhostConfig",
    "load_config",
    "load_config_text",
    "load_users_file",
    "parse_host_port",
    "client_host",
    "CONFIG_ENV",
    "line_of",
    "directory_problem",
]
