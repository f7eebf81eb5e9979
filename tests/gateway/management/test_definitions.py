"""Run-time definitions (``gateway/management/definitions.py``, ``runtime_users``,
``runtime_vhosts``): what each change saves, and that loading what was saved gives the
same users, vhosts, policies and limits, removals of the config's included."""
from __future__ import annotations

import pytest

from gateway.auth import Permission, User, UserDirectory
from gateway.broker import Broker
from gateway.management.definitions import Definitions
from gateway.management.errors import BadRequest, EntityNotFound
from gateway.store import DefinitionRecord, NullStore
from tests.support.gateway_process import password_hash

ALL = Permission(".*", ".*", ".*")


class RecordingStore(NullStore):
    """Keeps definition records in a dict, as the SQLite store keeps rows."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], DefinitionRecord] = {}

    def save_definition(self, record: DefinitionRecord) -> None:
        self.rows[(record.kind, record.key)] = record

    def delete_definition(self, kind: str, key: str) -> None:
        self.rows.pop((kind, key), None)

    def load_definitions(self) -> list[DefinitionRecord]:
        return [self.rows[k] for k in sorted(self.rows)]


CONFIG_USERS = [User("admin", password_hash("a"), ("administrator",), {"/": ALL}),
                User("app", password_hash("b"), (), {"/": ALL, "old": ALL})]


def definitions(store: RecordingStore) -> tuple[Definitions, Broker, UserDirectory]:
    broker = Broker(container_id="gw", vhosts=("/", "old"))
    directory = UserDirectory()
    defs = Definitions(broker, directory, CONFIG_USERS, ("/", "old"), store, lambda: 0.0)
    defs.load()
    return defs, broker, directory


def test_saved_changes_load_back_to_the_same_state() -> None:
    store = RecordingStore()
    defs, broker, directory = definitions(store)
    assert defs.vhosts.put_vhost("new", {"description": "d"})
    assert defs.users.put_user("dora", password_hash("d"), ["monitoring"])
    assert defs.users.put_permission("dora", "new", "", ".*", ".*")
    assert defs.vhosts.put_policy("new", "cap", {"pattern": ".", "definition": {"max-length": 3}})
    defs.vhosts.put_limit("new", "max-queues", 4)
    defs.delete_vhost("old")           # a config vhost: its removal is saved as such
    assert defs.users.delete_user("app") is True
    again, broker2, directory2 = definitions(store)
    assert broker2.vhost("new").policies.get("cap") is not None
    assert sorted(broker2.vhosts) == ["/", "new"]
    assert directory2.names() == ["admin", "dora"]
    assert dict(directory2.get("dora").permissions) == {"new": Permission("", ".*", ".*")}
    assert again.vhosts.policies() == [
        {"vhost": "new", "name": "cap", "pattern": ".", "apply-to": "all",
         "definition": {"max-length": 3}, "priority": 0}]
    assert again.vhosts.limits() == [{"vhost": "new", "value": {"max-queues": 4}}]
    assert again.vhosts.metadata("new")["description"] == "d"
    assert store.rows[("vhost", "old")].value is None and store.rows[("user", "app")].value is None


def test_a_deleted_config_user_comes_back_without_its_config_permissions() -> None:
    store = RecordingStore()
    defs, _, directory = definitions(store)
    defs.users.delete_user("app")
    defs.users.put_user("app", password_hash("x"), [])
    assert dict(directory.get("app").permissions) == {}   # as RabbitMQ: a new user has none


def test_refusals_name_the_problem_and_change_nothing() -> None:
    store = RecordingStore()
    defs, _, _ = definitions(store)
    with pytest.raises(BadRequest, match="no user 'nobody'"):
        defs.users.put_permission("nobody", "/", ".*", ".*", ".*")
    with pytest.raises(BadRequest, match="not a valid regular expression"):
        defs.users.put_permission("admin", "/", "(", "", "")
    with pytest.raises(BadRequest, match="policy 'p': key 'nope' is not supported"):
        defs.vhosts.put_policy("/", "p", {"pattern": ".", "definition": {"nope": 1}})
    with pytest.raises(EntityNotFound):
        defs.vhosts.put_policy("missing", "p", {"pattern": ".", "definition": {"max-length": 1}})
    with pytest.raises(BadRequest, match="unknown vhost limit"):
        defs.vhosts.put_limit("/", "max-channels", 1)
    assert store.rows == {}
