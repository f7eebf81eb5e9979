"""Shared fixtures: a real gateway process on ephemeral ports."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.support.gateway_process import GatewayProcess

# Tests never assert wall-clock speed: Hypothesis's per-example deadline and its
# too-slow health check only measure how loaded the machine is (2 shared cores).
settings.register_profile("gateway", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gateway")


@pytest.fixture(scope="session")
def gateway():
    """One gateway for the whole session (per xdist worker), default test config."""
    gw = GatewayProcess().start()
    yield gw
    gw.stop()


@pytest.fixture
def fresh_gateway():
    """A gateway of the test's own, for tests that change or stop it."""
    started: list[GatewayProcess] = []

    def make(**kwargs) -> GatewayProcess:
        gw = GatewayProcess(**kwargs).start()
        started.append(gw)
        return gw

    yield make
    for gw in started:
        gw.stop()
