"""Which management API ``ctl`` asks: ``--url``, else the management listener of the
gateway's own config file (``--config``, else ``$AMQP_GATEWAY_CONFIG``), else RabbitMQ's
default port on loopback, where the overview check then tells a RabbitMQ from us."""
from __future__ import annotations

from typing import Mapping, Optional

from gateway.config import CONFIG_ENV, ConfigError, client_host, load_config
from gateway.connection_log import peer_name
from gateway.ctl.client import DEFAULT_URL, CtlError

__all__ = ["management_url", "NoManagementListener"]


class NoManagementListener(CtlError):
    """The config file cannot say where the management API is (exit status 2: fix the
    command line or the file)."""

    exit_status = 2


def management_url(url: Optional[str], config: Optional[str], environ: Mapping[str, str]) -> str:
    """The base URL to ask; raises ``NoManagementListener`` for a config file that cannot
    be read or has no management listener."""
    if url:
        return url
    path = config or environ.get(CONFIG_ENV) or None
    if path is None:
        return DEFAULT_URL
    where = path if config else f"{path} (${CONFIG_ENV})"
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        raise NoManagementListener(f"cannot use the config file {where}: {exc.errors[0]}") from None
    management = cfg.management
    if not management.enabled:
        raise NoManagementListener(
            f"{where} does not turn on the management listener (management.enabled): give its "
            f"address with --url if the gateway was started with --management")
    if management.port == 0:
        raise NoManagementListener(f"{where}: management.port is 0 (a free port is chosen at "
                                   "start, and logged): give it with --url")
    return f"http://{peer_name(client_host(management.host), management.port)}"
