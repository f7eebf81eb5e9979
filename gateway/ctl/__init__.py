"""``amqp-gateway ctl``: a client of the management HTTP API (stdlib only; no Twisted)."""
from gateway.ctl.client import CtlError, ManagementClient
from gateway.ctl.commands import add_ctl_parser, ctl_command

__all__ = ["CtlError", "ManagementClient", "add_ctl_parser", "ctl_command"]
