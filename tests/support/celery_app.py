"""A small celery app for the edge-mode tests: one task, a broker URL and a result
directory from the environment (``EDGE_CELERY_BROKER``, ``EDGE_CELERY_RESULTS``), so the
test and its worker process (``celery -A tests.support.celery_app worker``) make the same app.

Settings a proxied vhost on an amqp10 backend needs (README, edge mode): remote control off
(its ``celery.pidbox`` fanout exchange and auto-delete reply queues are refused with 540),
the worker started ``--without-mingle --without-gossip`` (the same, for their broadcasts),
and a result backend that needs no reply queue (``file://``: ``rpc://`` replies on an
exclusive auto-delete queue). Publishes are confirmed (``confirm_publish``).
"""
from __future__ import annotations

import os

from celery import Celery

__all__ = ["make_app", "app", "add"]


def make_app(broker: str, results: str) -> Celery:
    celery = Celery("edge_celery", broker=broker, backend=f"file://{results}")
    celery.conf.update(
        worker_enable_remote_control=False,
        broker_transport_options={"confirm_publish": True},
        broker_connection_retry_on_startup=False,
        task_serializer="json", result_serializer="json", accept_content=["json"],
        worker_hijack_root_logger=False,
    )
    celery.task(name="edge.add")(_add)
    return celery


def _add(x: int, y: int) -> int:
    return x + y


app = make_app(os.environ.get("EDGE_CELERY_BROKER", "amqp://"), os.environ.get("EDGE_CELERY_RESULTS", "/tmp"))
add = app.tasks["edge.add"]
