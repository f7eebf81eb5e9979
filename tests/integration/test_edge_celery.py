"""A small celery app (``tests.support.celery_app``) on a vhost proxied to a broker that speaks
only AMQP 1.0 (Qpid Proton's C example broker, ``tests.support.example_broker``): tasks sent
with confirmed publishes through the gateway, a celery worker process consuming them
through it with acks, and their results back (the ``file://`` result backend: ``rpc://``
needs an exclusive auto-delete reply queue, which a 1.0 backend cannot make).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from tests.support.celery_app import make_app
from tests.support.example_broker import example_broker_config
from tests.support.gateway_process import make_gateway

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_celery_task_runs_through_a_gateway_on_a_1_0_only_broker(example_broker):
    pytest.importorskip("celery")
    with make_gateway(config_text=example_broker_config(example_broker.port)) as gw, \
            tempfile.TemporaryDirectory(prefix="celery-results-") as results:
        url = f"amqp://alice:secret@127.0.0.1:{gw.amqp_port}/edge"
        env = dict(os.environ, EDGE_CELERY_BROKER=url, EDGE_CELERY_RESULTS=results,
                   PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        app = make_app(url, results)
        sent = [app.send_task("edge.add", args=(i, 100)) for i in range(5)]   # before any worker
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.support.celery_app", "worker", "--pool=solo",
             "--without-mingle", "--without-gossip", "--without-heartbeat", "--loglevel=INFO"],
            cwd=_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert [r.get(timeout=60) for r in sent] == [100 + i for i in range(5)]
            later = app.send_task("edge.add", args=(20, 22))   # while the worker consumes
            assert later.get(timeout=60) == 42
        finally:
            worker.terminate()
            output, _ = worker.communicate(timeout=30)
        assert "edge.add" in output and "succeeded" in output, output
        # py-amqp prints a refused method as "(540) NOT_IMPLEMENTED"; the log's timestamps can hold "540"
        assert "(540)" not in output and "NOT_IMPLEMENTED" not in output, output
        with pytest.raises(Exception):   # every task was taken off the broker's queue
            example_broker.take("celery", 1, timeout=2)
