"""Shared fixtures: a real gateway on ephemeral ports (in this process or as a process), and
the test process's one reactor thread."""
from __future__ import annotations

import pytest
from _pytest.python import pytest_pyfunc_call as run_test_function
from hypothesis import HealthCheck, settings

from tests.support import gateway_process, reactor_thread
from tests.support.gateway_process import make_gateway
from tests.support.example_counts import FAST_EXAMPLES, PROFILE
from tests.support.local_spark import local_session
from tests.support.proton_ssl_config import share_one_ssl_config

# Tests never assert wall-clock speed: Hypothesis's per-example deadline and its
# too-slow health check only measure how loaded the machine is (2 shared cores).
settings.register_profile("gateway", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
# make test-fast: fewer examples per property (tests/support/example_counts.py)
settings.register_profile("fast", parent=settings.get_profile("gateway"), max_examples=FAST_EXAMPLES)
settings.load_profile(PROFILE)

share_one_ssl_config()


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """pytest-twisted uses our reactor thread (``tests/support/reactor_thread.py``)."""
    reactor_thread.adopt_pytest_twisted()


def pytest_unconfigure(config):
    reactor_thread.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """pytest-twisted's tests run on the reactor thread; every other test runs here, in
    the main thread, as pytest runs it (pytest-twisted would run it on the reactor)."""
    if reactor_thread.runs_on_reactor(pyfuncitem.obj):
        reactor_thread.start()
        return None
    return run_test_function(pyfuncitem)


#: fixtures that stand up a real cluster: a test using one is ``slow``
CLUSTERS = ("spark", "partner_rabbit")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests on a real cluster are ``slow``, and grouped for ``--dist loadgroup``: the
    RabbitMQ node's in group ``clusters`` (one node); the Spark session's, the pipeline's
    and the integration tests' alike, in group ``spark``, on one worker: one session (a
    JVM start, and the first report's compilation, 40 s and more of CPU on a busy
    machine) serves every report, and the other worker starts no Spark session. The
    standalone Spark cluster's test (``tests/pipeline/test_cli.py``) compares with a
    report in that session, so it is in ``spark`` too. pytest-xdist hands out the
    largest groups first, so the long work starts at once on both workers and the
    single tests fill in around it."""
    for item in items:
        names = item.fixturenames
        if not any(name in names for name in CLUSTERS):
            continue
        item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("xdist_group") is None:
            group = "clusters" if "partner_rabbit" in names else "spark"
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_runtest_setup(item):
    """Before the test's fixtures: a gateway process started for it is checked against
    its ``process`` marker (``gateway_process.UnmarkedProcessTest``)."""
    gateway_process.current_test = item


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef, request):
    """pytest-twisted's async fixtures are set up on the reactor thread: start it."""
    if reactor_thread.runs_on_reactor(fixturedef.func):
        reactor_thread.start()


@pytest.fixture(scope="session")
def gateway():
    """One gateway for the whole session (per xdist worker), default test config, in
    this process."""
    gw = make_gateway().start()
    yield gw
    gw.stop()


@pytest.fixture
def fresh_gateway():
    """A gateway of the test's own, for tests that change or stop it: in this process,
    or with ``process=True`` (or ``env``/``preexec_fn``) a ``GatewayProcess``."""
    started: list = []

    def make(**kwargs):
        gw = make_gateway(**kwargs).start()
        started.append(gw)
        return gw

    yield make
    for gw in started:
        gw.stop()


@pytest.fixture(scope="session")
def spark():
    """The test process's one local Spark session (a JVM start and a SparkContext take
    seconds to tens of seconds on a busy machine): every test that runs a report in this
    process shares it. Skips without PySpark or Java."""
    session = local_session("tests")
    yield session
    session.stop()
