"""Fixtures for the 1.0 engine tests: a broker, users and a pump factory."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password
from gateway.broker import Broker
from tests.support.amqp10_pump import Amqp10Pump, engine_factory


@pytest.fixture(scope="session")
def users() -> UserDirectory:
    everything = {vhost: Permission(".*", ".*", ".*") for vhost in ("/", "other")}
    return UserDirectory([
        User("guest", hash_password("guest"), permissions=everything),
        User("alice", hash_password("secret"), permissions=everything),
        User("anon", None, permissions=everything),
    ])


@pytest.fixture()
def broker() -> Broker:
    broker = Broker(container_id="gateway-test", vhosts=("/", "other"))
    broker.vhost("/").declare_queue("q1")
    return broker


@pytest.fixture()
def authenticator(users: UserDirectory) -> Authenticator:
    return Authenticator(users, anonymous_user="anon")


@pytest.fixture()
def connect(broker: Broker, authenticator: Authenticator) -> Callable[..., Amqp10Pump]:
    """``connect(**pump_options, engine=dict(engine overrides))`` -> an opened pump."""

    def make(*, engine: dict[str, Any] | None = None, open: bool = True, **options: Any) -> Amqp10Pump:
        pump = Amqp10Pump(engine_factory(broker, authenticator, **(engine or {})), **options)
        return pump.open() if open else pump

    return make
