"""The definitions table of SqliteStore: runtime users, vhosts, permissions, policies and
limits survive reopening, a removal of a config's definition (a NULL value) is kept as
such, and an older store (version 2, or 1) gets the table when opened."""
from __future__ import annotations

import sqlite3

import pytest

from gateway.store import DefinitionRecord, StoreUnusable
from gateway.store.sqlite_schema import SCHEMA_VERSION
from tests.gateway.store.test_sqlite import commit, open_store, path  # noqa: F401 - path: a fixture


def test_definitions_survive_reopening_and_replace_their_kind_and_key(path, loop) -> None:
    store = open_store(path, loop)
    store.save_definition(DefinitionRecord("user", "bob", {"tags": ["management"]}))
    store.save_definition(DefinitionRecord("policy", "/\x00ttl", {"pattern": "^q", "priority": 1}))
    store.save_definition(DefinitionRecord("user", "guest", None))   # the config's, removed
    commit(store, loop)
    store.save_definition(DefinitionRecord("user", "bob", {"tags": []}))
    store.delete_definition("policy", "/\x00ttl")
    commit(store, loop)
    store.close()
    again = open_store(path, loop)
    assert again.load_definitions() == [DefinitionRecord("user", "bob", {"tags": []}),
                                         DefinitionRecord("user", "guest", None)]
    again.close()


#: ``forwarded_ids`` as versions 1 to 3 made it (one id a row, no ``last_id``)
OLD_FORWARDED_IDS = ("DROP TABLE forwarded_ids; CREATE TABLE forwarded_ids(origin TEXT NOT NULL, "
                     "gateway_id INTEGER NOT NULL, seen_at REAL NOT NULL, "
                     "PRIMARY KEY (origin, gateway_id)) WITHOUT ROWID;")


@pytest.mark.parametrize("version,dropped", [
    (2, "DROP TABLE definitions;" + OLD_FORWARDED_IDS),
    (1, "DROP TABLE definitions; DROP TABLE outbox; DROP TABLE forwarded_ids;"),
])
def test_an_older_store_gets_the_definitions_table(path, loop, version, dropped) -> None:
    open_store(path, loop).close()
    db = sqlite3.connect(path)
    db.executescript(f"{dropped} PRAGMA user_version={version};")
    db.close()
    store = open_store(path, loop)
    store.save_definition(DefinitionRecord("vhost", "v2", {"description": "second"}))
    commit(store, loop)
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    assert db.execute("SELECT kind, key, value FROM definitions").fetchall() == [
        ("vhost", "v2", '{"description": "second"}')]
    db.close()


def test_a_row_that_is_not_json_makes_the_store_unusable_naming_it(path, loop) -> None:
    open_store(path, loop).close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO definitions VALUES ('user', 'bob', '{not json')")
    db.commit()
    db.close()
    store = open_store(path, loop)
    with pytest.raises(StoreUnusable, match="definition user 'bob' is not JSON"):
        store.load_definitions()
    store.close()
