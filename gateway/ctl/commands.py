"""``amqp-gateway ctl``: rabbitmqctl- and qdstat-like commands over the management HTTP API.

    amqp-gateway ctl [--url URL | --config FILE] [-u USER] [-p PASSWORD] [--vhost V] [--json] COMMAND

``status``; ``list connections|channels|links|queues|exchanges|bindings|consumers|
subscriptions|remotes|backends|shovels|vhosts|users|permissions|policies|vhost_limits``;
``purge queue NAME``; ``delete queue|exchange NAME``; ``close connection NAME [--reason
TEXT]``; ``redrive REMOTE`` (its dead letters back to its outbox); and the changes and
message moves of ``admin_commands`` (declare, add_user, set_permissions, set_policy, export,
import, publish, get). Tables by default, the API's JSON with ``--json``. The password may
also come from ``$AMQP_GATEWAY_PASSWORD`` (kept out of ``ps``).

Which gateway: ``--url``, else the management listener of ``--config FILE``, else of
``$AMQP_GATEWAY_CONFIG``'s file, else ``http://127.0.0.1:15672``. Every command first reads
the overview and stops unless it is amqp-gateway's (a RabbitMQ on the default port is
named, never listed or changed).

Exit status: 0 done; 1 the gateway is unreachable, something else answered, or it refused
the operation (the entity is missing, permissions, a conflict), with its reason on one
line; 2 a usage error, a config file without a management listener, or refused
credentials (something to fix in the command line).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from gateway.config import CONFIG_ENV
from gateway.ctl.admin_commands import ADMIN_VERBS, add_admin_verbs, run_admin
from gateway.ctl.client import DEFAULT_URL, CtlError, ManagementClient, api_path
from gateway.ctl.target import management_url
from gateway.ctl.tables import Column, cell_text, lookup, render_table

__all__ = ["add_ctl_parser", "ctl_command", "LISTS"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
PASSWORD_ENV = "AMQP_GATEWAY_PASSWORD"

#: what ``list X`` asks (whether it takes ``--vhost``) and the columns it prints
LISTS: dict[str, tuple[str, bool, list[Column]]] = {
    "connections": ("connections", False, [
        ("name", "name"), ("user", "user"), ("vhost", "vhost"), ("protocol", "protocol"),
        ("peer_host", "peer_host"), ("peer_port", "peer_port"), ("tls", "ssl"),
        ("channels", "channels"), ("backend", "backend")]),
    "channels": ("channels", False, [
        ("name", "name"), ("user", "user"), ("vhost", "vhost"), ("number", "number"),
        ("consumers", "consumer_count"), ("unacked", "messages_unacknowledged"),
        ("prefetch", "prefetch_count")]),
    "links": ("gateway/links", False, [
        ("name", "name"), ("connection", "connection"), ("role", "role"),
        ("address", "address"), ("queue", "queue"), ("credit", "credit"),
        ("unsettled", "unsettled")]),
    "queues": ("queues", True, [
        ("vhost", "vhost"), ("name", "name"), ("messages", "messages"),
        ("ready", "messages_ready"), ("unacked", "messages_unacknowledged"),
        ("consumers", "consumers"), ("durable", "durable"), ("auto_delete", "auto_delete")]),
    "exchanges": ("exchanges", True, [
        ("vhost", "vhost"), ("name", "name"), ("type", "type"), ("durable", "durable"),
        ("auto_delete", "auto_delete"), ("internal", "internal")]),
    "bindings": ("bindings", True, [
        ("vhost", "vhost"), ("source", "source"), ("destination", "destination"),
        ("type", "destination_type"), ("routing_key", "routing_key"),
        ("arguments", "arguments")]),
    "consumers": ("consumers", True, [
        ("vhost", "queue.vhost"), ("queue", "queue.name"), ("consumer_tag", "consumer_tag"),
        ("channel", "channel_details.name"), ("ack_required", "ack_required"),
        ("prefetch", "prefetch_count")]),
    "subscriptions": ("subscriptions", True, [
        ("vhost", "vhost"), ("queue", "queue"), ("link_name", "link_name"),
        ("container_id", "container_id"), ("source", "source"), ("durable", "durable"),
        ("consumers", "consumers"), ("messages", "messages"), ("unsettled", "unsettled")]),
    "remotes": ("gateway/remotes", False, [
        ("name", "name"), ("kind", "kind"), ("state", "state"), ("host", "host"), ("port", "port"),
        ("outbox_depth", "outbox_depth"), ("forwarded", "forwarded"),
        ("dead_lettered", "dead_lettered"), ("last_error", "last_error")]),
    "backends": ("gateway/backends", False, [
        ("name", "name"), ("kind", "kind"), ("state", "state"), ("connections", "connections"),
        ("nodes", "node_states"), ("refused", "refused"), ("lost", "lost"), ("last_error", "last_error")]),
    "shovels": ("gateway/shovels", False, [
        ("name", "name"), ("state", "state"), ("source", "source"),
        ("destination", "destination"), ("forwarded", "forwarded")]),
    "vhosts": ("vhosts", False, [
        ("name", "name"), ("messages", "messages"), ("ready", "messages_ready"),
        ("unacked", "messages_unacknowledged"), ("description", "description")]),
    "users": ("users", False, [("name", "name"), ("tags", "tags")]),
    "permissions": ("permissions", False, [
        ("user", "user"), ("vhost", "vhost"), ("configure", "configure"), ("write", "write"),
        ("read", "read")]),
    "policies": ("policies", True, [
        ("vhost", "vhost"), ("name", "name"), ("pattern", "pattern"), ("apply-to", "apply-to"),
        ("priority", "priority"), ("definition", "definition")]),
    "vhost_limits": ("vhost-limits", True, [("vhost", "vhost"), ("limits", "value")]),
}


def add_ctl_parser(sub: Any) -> None:
    """``ctl`` and its sub-commands on the CLI's sub-parser set."""
    ctl = sub.add_parser("ctl", help="inspect and manage a running gateway over its "
                                     "management HTTP API")
    where = ctl.add_mutually_exclusive_group()
    where.add_argument("--url", default=None,
                       help=f"the management API (default: ${CONFIG_ENV}'s config, else {DEFAULT_URL})")
    where.add_argument("--config", metavar="FILE", default=None,
                       help=f"the gateway's config file: ask its management listener "
                            f"(default ${CONFIG_ENV})")
    ctl.add_argument("-u", "--user", default="guest", help="user name (default guest)")
    ctl.add_argument("-p", "--password", default=None,
                     help=f"password (default ${PASSWORD_ENV}, else guest)")
    ctl.add_argument("--vhost", default=None,
                     help="only this vhost (lists); the entity's vhost (purge, delete; "
                          "default /)")
    ctl.add_argument("--json", action="store_true", help="print the API's JSON")
    ctl.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    verbs = ctl.add_subparsers(dest="verb", required=True)
    verbs.add_parser("status", help="the gateway's overview")
    ls = verbs.add_parser("list", help="list entities")
    ls.add_argument("what", choices=sorted(LISTS))
    purge = verbs.add_parser("purge", help="drop a queue's ready messages")
    purge.add_argument("what", choices=["queue"])
    purge.add_argument("name")
    delete = verbs.add_parser("delete", help="delete a queue or an exchange")
    delete.add_argument("what", choices=["queue", "exchange"])
    delete.add_argument("name")
    close = verbs.add_parser("close", help="close a connection")
    close.add_argument("what", choices=["connection"])
    close.add_argument("name")
    close.add_argument("--reason", default="closed by amqp-gateway ctl")
    again = verbs.add_parser("redrive", help="send a remote's dead letters again (back to "
                                             "its outbox)")
    again.add_argument("remote", help="the remote's container")
    add_admin_verbs(verbs)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _list(client: ManagementClient, args: argparse.Namespace) -> None:
    path, by_vhost, columns = LISTS[args.what]
    segments = path.split("/")
    if by_vhost and args.vhost:
        segments.append(args.vhost)
    rows = client.get(api_path(*segments))
    if args.json:
        _print_json(rows)
        return
    for line in render_table(rows, columns):
        print(line)


#: (label, dotted key) of ``status``, in order
_STATUS_FIELDS: list[Column] = [
    ("product", "product_name"), ("version", "product_version"), ("node", "node"),
    ("uptime", "uptime"),
    ("connections", "object_totals.connections"), ("channels", "object_totals.channels"),
    ("queues", "object_totals.queues"), ("exchanges", "object_totals.exchanges"),
    ("consumers", "object_totals.consumers"), ("messages", "queue_totals.messages"),
    ("ready", "queue_totals.messages_ready"),
    ("unacked", "queue_totals.messages_unacknowledged"),
    ("published", "message_stats.publish"), ("delivered", "message_stats.deliver_get"),
    ("alarms", "alarms")]


def _status(client: ManagementClient, args: argparse.Namespace, overview: dict[str, Any]) -> None:
    if args.json:
        _print_json(overview)
        return
    shown = [(label, lookup(overview, key)) for label, key in _STATUS_FIELDS]
    width = max(len(label) for label, _ in shown)
    for label, value in shown:
        if label == "uptime" and isinstance(value, int):
            value = _duration(value // 1000)
        if value is not None:
            print(f"{label.ljust(width)}  {cell_text(value) or 'none'}")


def _duration(seconds: int) -> str:
    """``1d 2h 3m 4s`` (RabbitMQ's ``uptime`` is in milliseconds)."""
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    parts.append(f"{seconds}s")
    return " ".join(parts)


def _vhost(args: argparse.Namespace) -> str:
    return args.vhost or "/"


def _change(client: ManagementClient, args: argparse.Namespace) -> str:
    if args.verb == "purge":
        client.delete(api_path("queues", _vhost(args), args.name, "contents"))
        return f"queue '{args.name}' in vhost '{_vhost(args)}' purged"
    if args.verb == "delete":
        plural = "queues" if args.what == "queue" else "exchanges"
        client.delete(api_path(plural, _vhost(args), args.name))
        return f"{args.what} '{args.name}' in vhost '{_vhost(args)}' deleted"
    if args.verb == "redrive":
        done = client.request("POST", api_path("remotes", args.remote, "redrive"))
        return (f"{done['redriven']} dead letter(s) of remote '{args.remote}' back in its outbox"
                + (f"; {done['kept']} kept (no node)" if done["kept"] else ""))
    client.delete(api_path("connections", args.name), headers={"X-Reason": args.reason})
    return f"connection '{args.name}' closed"


def ctl_command(args: argparse.Namespace) -> int:
    password = args.password if args.password is not None else os.environ.get(PASSWORD_ENV,
                                                                                "guest")
    try:
        url = management_url(args.url, args.config, os.environ)
        client = ManagementClient(url, args.user, password, args.timeout)
        overview = client.check_gateway()
        if args.verb == "status":
            _status(client, args, overview)
        elif args.verb == "list":
            _list(client, args)
        elif args.verb in ADMIN_VERBS:
            run_admin(client, args, _print_json)
        else:
            done = _change(client, args)
            if args.json:
                _print_json({"ok": True, "done": done})
            else:
                print(done)
    except CtlError as exc:
        print(f"amqp-gateway ctl: {exc}", file=sys.stderr)
        return exc.exit_status
    return EXIT_OK

