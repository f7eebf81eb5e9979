"""``$management`` / ``amqp$management`` (AMQP Management) against a real gateway.

``admin`` carries the ``administrator`` tag, ``ops`` the ``management`` tag with
configure rights on ``ops.*`` only, and ``guest`` no tag at all. Spoken with proton's
request/response client over a dynamic reply queue.
"""
from __future__ import annotations

import pika
import pytest
from proton.utils import BlockingConnection

from tests.support.access_config import access_config, write_users_file
from tests.support.amqp091_clients import pika_params
from tests.support.amqp_management_client import ManagementClient
from tests.support.gateway_process import make_gateway
from tests.support.ledger_files import read_events
from tests.support.rhea_client import rhea_management

pytestmark = pytest.mark.integration

ALL = {"configure": ".*", "write": ".*", "read": ".*"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("mgmt-users"))
    users = write_users_file(directory, {
        "admin": {"password": "adminpw", "tags": ["administrator"], "permissions": {"/": ALL}},
        "ops": {"password": "opspw", "tags": ["management"],
                "permissions": {"/": {"configure": r"ops\..*|amq\.gen-.*", "write": ".*", "read": ".*"}}},
    })
    gateway = make_gateway(config_text=access_config(users_file=users)).start()
    yield gateway
    gateway.stop()


def connect(gw, user: str, password: str) -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user=user, password=password,
                              virtual_host="vhost:/", allowed_mechs="PLAIN", sasl_enabled=True,
                              allow_insecure_mechs=True, timeout=10)


@pytest.fixture
def admin(gw):
    conn = connect(gw, "admin", "adminpw")
    yield ManagementClient(conn)
    conn.close()


def test_queue_crud_and_the_queue_operations(gw, admin) -> None:
    created = admin.call("CREATE", "queue", "mq.crud", body={"durable": True, "arguments": {"x-max-length": 10}})
    assert created.status == 201, created.description
    assert created.body["name"] == "mq.crud" and created.body["durable"] is True
    assert created.body["arguments"] == {"x-max-length": 10}
    again = admin.call("CREATE", "queue", "mq.crud", body={})
    assert (again.status, again.description) == (409, "queue 'mq.crud' in vhost '/' already exists")
    conn = pika.BlockingConnection(pika_params(gw))
    ch = conn.channel()
    for i in range(3):
        ch.basic_publish("", "mq.crud", f"m{i}".encode())
    ch.queue_declare("mq.parking")
    conn.close()
    read = admin.call("READ", "queue", "mq.crud")
    assert (read.status, read.body["messages"], read.body["messages_ready"]) == (200, 3, 3)
    moved = admin.call("MOVE", "queue", "mq.crud", body={"to": "mq.parking", "count": 1})
    assert (moved.status, moved.body) == (200, {"message_count": 1})
    purged = admin.call("PURGE", "queue", "mq.crud")
    assert (purged.status, purged.body) == (200, {"message_count": 2})
    no_dlx = admin.call("DEAD-LETTER", "queue", "mq.parking")
    assert no_dlx.status == 409 and "no dead-letter exchange" in no_dlx.description
    same = admin.call("UPDATE", "queue", "mq.crud", body={"durable": True})
    assert same.status == 200
    changed = admin.call("UPDATE", "queue", "mq.crud", body={"durable": False})
    assert changed.status == 409 and "'durable'" in changed.description
    deleted = admin.call("DELETE", "queue", "mq.crud")
    assert (deleted.status, deleted.body) == (204, {})
    assert admin.call("READ", "queue", "mq.crud").status == 404


def test_exchange_and_binding_crud(admin) -> None:
    assert admin.call("CREATE", "exchange", "mx.one", body={"type": "topic"}).status == 201
    assert admin.call("CREATE", "queue", "mq.bound", body={}).status == 201
    bound = admin.call("CREATE", "binding", body={"source": "mx.one", "destination": "mq.bound",
                                                  "destination_type": "queue", "routing_key": "a.#"})
    assert bound.status == 201, bound.description
    identity = bound.body["identity"]
    assert identity == "mx.one/queue/mq.bound/a.%23"
    assert admin.call("READ", "binding", identity=identity).body["routing_key"] == "a.#"
    assert admin.call("DELETE", "binding", identity=identity).status == 204
    assert admin.call("READ", "binding", identity=identity).status == 404
    assert admin.call("DELETE", "exchange", "mx.one").status == 204
    assert admin.call("DELETE", "queue", "mq.bound").status == 204


def test_query_with_paging_and_attribute_names(admin) -> None:
    for i in range(5):
        assert admin.call("CREATE", "queue", f"mq.page{i}", body={"durable": False}).status == 201
    names = {"attributeNames": ["name", "durable"]}
    everything = admin.call("QUERY", body=names, entityType="queue")
    page = [row[0] for row in everything.body["results"] if row[0].startswith("mq.page")]
    assert page == [f"mq.page{i}" for i in range(5)]
    total = len(everything.body["results"])
    first = admin.call("QUERY", body=names, entityType="queue", offset=0, count=2)
    rest = admin.call("QUERY", body=names, entityType="queue", offset=2)
    assert first.body["attributeNames"] == ["name", "durable"]
    assert first.properties["count"] == 2
    assert first.body["results"] + rest.body["results"] == everything.body["results"]
    assert len(rest.body["results"]) == total - 2
    connections = admin.call("QUERY", body={"attributeNames": ["user", "protocol"]}, entityType="connection")
    assert ["admin", "AMQP 1.0"] in connections.body["results"]


def test_discovery_operations(admin) -> None:
    types = admin.call("GET-TYPES", name="self")
    assert {"queue", "exchange", "binding", "vhost", "connection", "link", "user"} <= set(types.body)
    attributes = admin.call("GET-ATTRIBUTES", name="self", entityType="queue")
    assert "messages_ready" in attributes.body["queue"]
    operations = admin.call("GET-OPERATIONS", name="self")
    assert {"PURGE", "MOVE", "DEAD-LETTER", "CREATE"} <= set(operations.body["queue"])
    assert admin.call("GET-MGMT-NODES", name="self").body == ["$management", "amqp$management"]


def test_bad_request_unknown_entity_and_refusal(gw, admin) -> None:
    missing_op = admin.call("", "queue", "x")
    assert missing_op.status == 400 and "operation" in missing_op.description
    bad_type = admin.call("READ", "teapot", "x")
    assert bad_type.status == 400 and "unknown entity type 'teapot'" in bad_type.description
    bad_count = admin.call("QUERY", entityType="queue", count=-1)
    assert bad_count.status == 400
    unknown = admin.call("READ", "queue", "no.such.queue")
    assert (unknown.status, unknown.description) == (404, "no queue 'no.such.queue' in vhost '/'")
    guest = connect(gw, "guest", "guest")
    try:
        refused = ManagementClient(guest, "amqp$management").call("READ", "queue", "x")
        assert refused.status == 403 and "user 'guest' has no management access" in refused.description
    finally:
        guest.close()
    ops = connect(gw, "ops", "opspw")
    try:
        client = ManagementClient(ops)
        refused = client.call("CREATE", "queue", "admin.only", body={})
        assert refused.status == 403
        assert refused.description == "configure access to resource 'admin.only' in vhost '/' refused for user 'ops'"
        assert client.call("CREATE", "queue", "ops.mine", body={}).status == 201
        others = client.call("QUERY", body={"attributeNames": ["user"]}, entityType="connection")
        assert {row[0] for row in others.body["results"]} == {"ops"}
    finally:
        ops.close()


def test_batch_applies_all_or_nothing(admin) -> None:
    good = admin.call("BATCH", body=[
        {"operation": "CREATE", "type": "exchange", "name": "mx.batch", "body": {"type": "fanout"}},
        {"operation": "CREATE", "type": "queue", "name": "mq.batch", "body": {}},
        {"operation": "CREATE", "type": "binding", "body": {"source": "mx.batch", "destination": "mq.batch"}},
    ])
    assert good.status == 200, good.description
    assert [r["statusCode"] for r in good.body] == [201, 201, 201]
    failed = admin.call("BATCH", body=[
        {"operation": "CREATE", "type": "queue", "name": "mq.batch2", "body": {}},
        {"operation": "DELETE", "type": "exchange", "name": "mx.batch"},
        {"operation": "READ", "type": "queue", "name": "mq.missing"},
    ])
    assert failed.status == 404
    assert failed.description == ("command 2 (READ queue mq.missing) failed: no queue 'mq.missing' in vhost '/'; "
                                  "the batch was undone")
    assert admin.call("READ", "queue", "mq.batch2").status == 404
    assert admin.call("READ", "exchange", "mx.batch").status == 200
    identity = "mx.batch/queue/mq.batch/~"
    assert admin.call("READ", "binding", identity=identity).status == 200
    refused = admin.call("BATCH", body=[{"operation": "PURGE", "type": "queue", "name": "mq.batch"}])
    assert refused.status == 400 and "cannot be undone" in refused.description


def test_connection_delete_closes_it_with_the_reason(gw, admin) -> None:
    victim = pika.BlockingConnection(pika_params(gw))
    rows = admin.call("QUERY", body={"attributeNames": ["name", "protocol"]}, entityType="connection").body
    (name,) = [n for n, protocol in rows["results"] if protocol == "AMQP 0-9-1"]
    closed = admin.call("DELETE", "connection", name, body={"reason": "maintenance window"})
    assert closed.status == 204
    with pytest.raises(pika.exceptions.ConnectionClosed) as info:
        victim.process_data_events(time_limit=5)
        victim.channel()
    assert "maintenance window" in str(info.value)


def test_rhea_speaks_management(gw) -> None:
    replies = rhea_management(gw.amqp_port, "admin", "adminpw", [
        {"properties": {"operation": "CREATE", "type": "queue", "name": "mq.rhea"},
         "body": {"durable": False}},
        {"properties": {"operation": "READ", "type": "queue", "name": "mq.rhea"}},
        {"properties": {"operation": "QUERY", "type": "org.amqp.management", "name": "self",
                        "entityType": "queue", "offset": 0, "count": 1},
         "body": {"attributeNames": ["name"]}},
        {"properties": {"operation": "READ", "type": "queue", "name": "mq.nope"}},
        {"properties": {"operation": "READ"}},
        {"properties": {"operation": "DELETE", "type": "queue", "name": "mq.rhea"}},
    ])
    status = [r["properties"]["statusCode"] for r in replies]
    assert status == [201, 200, 200, 404, 400, 204]
    assert replies[1]["body"]["name"] == "mq.rhea" and replies[1]["body"]["durable"] is False
    assert replies[2]["properties"]["count"] == 1 and replies[2]["body"]["attributeNames"] == ["name"]
    assert replies[3]["properties"]["statusDescription"] == "no queue 'mq.nope' in vhost '/'"
    refused = rhea_management(gw.amqp_port, "guest", "guest", [
        {"properties": {"operation": "READ", "type": "queue", "name": "mq.rhea"}}], node="amqp$management")
    assert refused[0]["properties"]["statusCode"] == 403


def test_a_0_9_1_client_manages_with_its_validated_user_id(gw) -> None:
    """A 0-9-1 request goes to the default exchange with routing key $management; the
    node acts as the message's user_id, which the gateway has checked is the
    connection's user, and answers to reply_to with the status in the headers."""
    conn = pika.BlockingConnection(pika_params(gw, user="admin", password="adminpw"))
    ch = conn.channel()
    replies = ch.queue_declare("", exclusive=True).method.queue

    def call(user_id, **headers):
        ch.basic_publish("", "$management", b"", pika.BasicProperties(
            reply_to=replies, correlation_id="c1", user_id=user_id, headers=headers))
        for _ in range(100):
            method, props, _body = ch.basic_get(replies, auto_ack=True)
            if method is not None:
                return props
            conn.sleep(0.05)
        raise AssertionError("no reply")

    read = call("admin", operation="READ", type="exchange", name="amq.topic")
    assert (read.correlation_id, read.headers["statusCode"]) == ("c1", 200)
    anonymous = call(None, operation="READ", type="exchange", name="amq.topic")
    assert anonymous.headers["statusCode"] == 403
    assert "user_id" in anonymous.headers["statusDescription"]
    conn.close()


def test_null_arguments_are_absent_or_a_400_never_an_internal_error(gw, admin) -> None:
    """Issue 41, item 4: ``offset`` present but null closed the connection with
    ``amqp:internal-error``; null standard arguments are now taken as absent, and null
    attributes are a 400 naming them. The connection stays open throughout."""
    assert admin.call("CREATE", "queue", "mq.nulls", body={}).status == 201
    names = {"attributeNames": ["name"]}
    for props in ({"offset": None, "count": 1}, {"offset": None}, {"offset": 0, "count": None},
                  {"vhost": None, "offset": None, "count": 5}):
        reply = admin.call("QUERY", body=names, entityType="queue", **props)
        assert reply.status == 200, (props, reply.description)
        assert 1 <= len(reply.body["results"]) <= (props.get("count") or 1000)
    for body, words in (({"durable": None}, "'durable' must be a boolean"),
                        ({"type": None}, "'type' must be a string")):
        reply = admin.call("CREATE", "exchange", "mq.nulls.x", body=body)
        assert reply.status == 400 and words in reply.description, reply.description
    moved = admin.call("MOVE", "queue", "mq.nulls", body={"to": None, "count": None})
    assert moved.status == 400 and "'to' must be a string" in moved.description
    assert admin.call("PURGE", "queue", "mq.nulls", body={"count": None}).status == 200
    assert admin.call("DELETE", "queue", "mq.nulls", body={"if_unused": None}).status == 400
    assert admin.call("DELETE", "queue", "mq.nulls").status == 204


def test_a_move_is_recorded_in_the_ledger_under_the_message_s_gateway_id(fresh_gateway, tmp_path) -> None:
    """Issue 43: MOVE goes through the vhost, which records each moved message in the
    ledger (from, to, the same gateway id) as the report's reconciliation needs."""
    directory = str(tmp_path / "ledger")
    users = write_users_file(str(tmp_path), {
        "admin": {"password": "adminpw", "tags": ["administrator"], "permissions": {"/": ALL}}})
    gw = fresh_gateway(config_text=access_config(
        users_file=users, extra=f"ledger:\n  directory: {directory}\n  flush_interval: 0.2\n"))
    conn = pika.BlockingConnection(pika_params(gw, user="admin", password="adminpw"))
    ch = conn.channel()
    ch.confirm_delivery()
    for name in ("mv.work", "mv.parking"):
        ch.queue_declare(name)
    for i in range(3):
        ch.basic_publish("", "mv.work", b"x", pika.BasicProperties(message_id=f"mv{i}"))
    conn.close()
    management = connect(gw, "admin", "adminpw")
    try:
        moved = ManagementClient(management).call("MOVE", "queue", "mv.work", body={"to": "mv.parking", "count": 2})
    finally:
        management.close()
    assert (moved.status, moved.body) == (200, {"message_count": 2})
    assert gw.stop() == 0
    events = read_events(directory)
    ids = {e["gateway_id"]: e.get("message_id") for e in events if e["event"] == "received"}
    moves = [(ids[e["gateway_id"]], e["queue"], e["routed_to"]) for e in events if e["event"] == "moved"]
    assert moves == [("mv0", "mv.work", ["mv.parking"]), ("mv1", "mv.work", ["mv.parking"])]
