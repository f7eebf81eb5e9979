"""``amqp-gateway ctl`` commands that change a gateway or move messages, over the HTTP API
(rabbitmqctl's and rabbitmqadmin's verbs):

    declare queue NAME [--durable true|false] [--auto-delete] [--arguments JSON]
    declare exchange NAME --type TYPE [--durable ...] [--auto-delete] [--internal] [--arguments JSON]
    declare binding SOURCE DESTINATION [--destination-type queue|exchange] [--routing-key K]
    declare vhost NAME [--description TEXT] [--tags a,b]
    add_user NAME [PASSWORD | --password-stdin | --password-hash HASH] [--tags a,b]
    set_permissions USER CONFIGURE WRITE READ
    set_policy NAME PATTERN DEFINITION [--priority N] [--apply-to queues|exchanges|all]
    export FILE|-            import FILE|-
    publish ROUTING_KEY [BODY] [--exchange X] [--properties JSON]     (no BODY: standard input)
    get QUEUE [--count N] [--ackmode MODE]

``--vhost`` (default ``/``) says where; ``export``/``import`` with ``--vhost`` take one
vhost's definitions. A password on the command line shows in ``ps``: prefer
``--password-stdin``.
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any, Callable

from gateway.ctl.client import CtlError, ManagementClient, api_path
from gateway.ctl.tables import Column, render_table

__all__ = ["add_admin_verbs", "ADMIN_VERBS", "run_admin", "UsageError"]

#: ``get``'s table
_GET_COLUMNS: list[Column] = [
    ("routing_key", "routing_key"), ("exchange", "exchange"), ("message_count", "message_count"),
    ("payload_bytes", "payload_bytes"), ("redelivered", "redelivered"), ("payload", "payload")]
_ACKMODES = ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false")


class UsageError(CtlError):
    """A bad argument (JSON that does not parse, a file that cannot be read)."""

    exit_status = 2


def _json_argument(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
    return text.lower() == "true"


def add_admin_verbs(verbs: Any) -> None:
    """The verbs of this module on ``ctl``'s sub-parser set."""
    declare = verbs.add_parser("declare", help="declare a queue, exchange, binding or vhost")
    what = declare.add_subparsers(dest="what", required=True)
    queue = what.add_parser("queue")
    queue.add_argument("name")
    exchange = what.add_parser("exchange")
    exchange.add_argument("name")
    exchange.add_argument("--type", required=True, choices=["direct", "fanout", "topic", "headers"])
    exchange.add_argument("--internal", action="store_true")
    for parser in (queue, exchange):
        parser.add_argument("--durable", type=_boolean, default=True, metavar="true|false")
        parser.add_argument("--auto-delete", action="store_true")
        parser.add_argument("--arguments", type=_json_argument, default={}, metavar="JSON")
    binding = what.add_parser("binding")
    binding.add_argument("source")
    binding.add_argument("destination")
    binding.add_argument("--destination-type", choices=["queue", "exchange"], default="queue")
    binding.add_argument("--routing-key", default="")
    binding.add_argument("--arguments", type=_json_argument, default={}, metavar="JSON")
    vhost = what.add_parser("vhost")
    vhost.add_argument("name")
    vhost.add_argument("--description", default=None)
    vhost.add_argument("--tags", default=None, help="names separated by commas")

    user = verbs.add_parser("add_user", aliases=["add-user"], help="create or change a user")
    user.add_argument("name")
    # not ``password``: that is ctl's own -p (the caller's), in the same namespace
    user.add_argument("new_password", nargs="?", metavar="PASSWORD",
                      help="shows in ps: prefer --password-stdin")
    user.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    user.add_argument("--password-hash", help="a hash instead (amqp-gateway hash-password's, or "
                                              "RabbitMQ's with --hashing-algorithm)")
    user.add_argument("--hashing-algorithm", default=None)
    user.add_argument("--tags", default="", help="names separated by commas (administrator, ...)")

    perms = verbs.add_parser("set_permissions", aliases=["set-permissions"],
                             help="set a user's permissions on --vhost")
    # not ``user``: that is ctl's own -u (the caller's), in the same namespace
    perms.add_argument("target_user", metavar="USER")
    for name in ("configure", "write", "read"):
        perms.add_argument(name)

    policy = verbs.add_parser("set_policy", aliases=["set-policy"], help="set a policy on --vhost")
    policy.add_argument("name")
    policy.add_argument("pattern")
    policy.add_argument("definition", type=_json_argument, help='JSON, e.g. \'{"max-length": 1000}\'')
    policy.add_argument("--priority", type=int, default=0)
    policy.add_argument("--apply-to", choices=["all", "queues", "exchanges"], default="all")

    export = verbs.add_parser("export", help="write the definitions (JSON) to FILE, - for stdout")
    export.add_argument("file")
    imp = verbs.add_parser("import", help="load definitions (JSON) from FILE, - for stdin")
    imp.add_argument("file")

    publish = verbs.add_parser("publish", help="publish a message (to --exchange, default amq.default)")
    publish.add_argument("routing_key")
    publish.add_argument("body", nargs="?", help="the payload (default: standard input)")
    publish.add_argument("--exchange", default="amq.default")
    publish.add_argument("--properties", type=_json_argument, default={}, metavar="JSON",
                         help='0-9-1 properties, e.g. \'{"delivery_mode": 2}\'')
    get = verbs.add_parser("get", help="show (and take, with --ackmode) messages of a queue")
    get.add_argument("queue")
    get.add_argument("--count", type=int, default=1)
    get.add_argument("--ackmode", choices=_ACKMODES, default="ack_requeue_true",
                     help="default ack_requeue_true: the messages stay")


def _vhost(args: argparse.Namespace) -> str:
    return args.vhost or "/"


def _declare(client: ManagementClient, args: argparse.Namespace) -> str:
    vhost = _vhost(args)
    if args.what == "queue":
        client.request("PUT", api_path("queues", vhost, args.name), {
            "durable": args.durable, "auto_delete": args.auto_delete, "arguments": args.arguments})
    elif args.what == "exchange":
        client.request("PUT", api_path("exchanges", vhost, args.name), {
            "type": args.type, "durable": args.durable, "auto_delete": args.auto_delete,
            "internal": args.internal, "arguments": args.arguments})
    elif args.what == "binding":
        kind = "q" if args.destination_type == "queue" else "e"
        client.request("POST", api_path("bindings", vhost, "e", args.source, kind, args.destination),
                       {"routing_key": args.routing_key, "arguments": args.arguments})
        return (f"binding from exchange '{args.source}' to {args.destination_type} "
                f"'{args.destination}' declared in vhost '{vhost}'")
    else:
        body = {k: v for k, v in (("description", args.description), ("tags", args.tags)) if v is not None}
        client.request("PUT", api_path("vhosts", args.name), body)
        return f"vhost '{args.name}' declared"
    return f"{args.what} '{args.name}' declared in vhost '{vhost}'"


def _add_user(client: ManagementClient, args: argparse.Namespace) -> str:
    given = [bool(args.new_password), args.password_stdin, args.password_hash is not None]
    if sum(given) != 1:
        raise UsageError("give the password once: as PASSWORD, with --password-stdin, or as "
                         "--password-hash")
    body: dict[str, Any] = {"tags": args.tags}
    if args.password_hash is not None:
        body["password_hash"] = args.password_hash
        if args.hashing_algorithm:
            body["hashing_algorithm"] = args.hashing_algorithm
    else:
        password = args.new_password or sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise UsageError("empty password")
        body["password"] = password
    client.request("PUT", api_path("users", args.name), body)
    return f"user '{args.name}' set"


def _set_permissions(client: ManagementClient, args: argparse.Namespace) -> str:
    client.request("PUT", api_path("permissions", _vhost(args), args.target_user),
                   {"configure": args.configure, "write": args.write, "read": args.read})
    return f"permissions of user '{args.target_user}' on vhost '{_vhost(args)}' set"


def _set_policy(client: ManagementClient, args: argparse.Namespace) -> str:
    client.request("PUT", api_path("policies", _vhost(args), args.name), {
        "pattern": args.pattern, "definition": args.definition, "priority": args.priority,
        "apply-to": args.apply_to})
    return f"policy '{args.name}' set on vhost '{_vhost(args)}'"


def _definitions_path(args: argparse.Namespace) -> str:
    return api_path("definitions", args.vhost) if args.vhost else "/api/definitions"


def _export(client: ManagementClient, args: argparse.Namespace) -> str:
    text = json.dumps(client.get(_definitions_path(args)), indent=2, sort_keys=True) + "\n"
    if args.file == "-":
        sys.stdout.write(text)
        return ""
    try:
        with open(args.file, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.file}: {exc.strerror}") from None
    return f"definitions written to {args.file}"


def _import(client: ManagementClient, args: argparse.Namespace) -> str:
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
        doc = json.loads(text)
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"{args.file} is not JSON: {exc}") from None
    client.request("POST", _definitions_path(args), doc)
    return f"definitions imported from {args.file}"


def _publish(client: ManagementClient, args: argparse.Namespace) -> str:
    if args.body is not None:
        body = {"payload": args.body, "payload_encoding": "string"}
    else:
        body = {"payload": base64.b64encode(sys.stdin.buffer.read()).decode("ascii"),
                "payload_encoding": "base64"}
    body.update(routing_key=args.routing_key, properties=args.properties)
    answer = client.request("POST", api_path("exchanges", _vhost(args), args.exchange, "publish"), body)
    if isinstance(answer, dict) and answer.get("routed"):
        return "message published"
    return "message published but not routed (no queue took it)"


def _get(client: ManagementClient, args: argparse.Namespace) -> list[dict[str, Any]]:
    return client.request("POST", api_path("queues", _vhost(args), args.queue, "get"), {
        "count": args.count, "ackmode": args.ackmode, "encoding": "auto"}) or []


_RUNS: dict[str, Callable[[ManagementClient, argparse.Namespace], str]] = {
    "declare": _declare, "add_user": _add_user, "add-user": _add_user,
    "set_permissions": _set_permissions, "set-permissions": _set_permissions,
    "set_policy": _set_policy, "set-policy": _set_policy, "export": _export, "import": _import,
    "publish": _publish,
}
#: the verbs ``run_admin`` runs
ADMIN_VERBS = frozenset(_RUNS) | {"get"}


def run_admin(client: ManagementClient, args: argparse.Namespace, print_json: Callable[[Any], None]) -> None:
    """Run one of ``ADMIN_VERBS``, printing what it did (``--json``: as JSON)."""
    if args.verb == "get":
        messages = _get(client, args)
        if args.json:
            print_json(messages)
        else:
            for line in render_table(messages, _GET_COLUMNS):
                print(line)
        return
    done = _RUNS[args.verb](client, args)
    if args.json and not (args.verb == "export" and args.file == "-"):
        print_json({"ok": True, "done": done})
    elif done:
        print(done)
