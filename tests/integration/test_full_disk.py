"""A gateway whose store runs out of space (issue 41, item 7), against real gateway
processes and a real lack of space: a file-size limit (``RLIMIT_FSIZE``: writes beyond it
fail with EFBIG, as the failing-disk tests do) or a small tmpfs that really fills up
(skipped where mounting is not allowed).

- The store alarm must not flap: one block, kept while publishers keep trying, until
  space is freed (it was 6 blocks and 5 unblocks a minute: a one-page probe passed).
- After a restart on a full disk a queue must still be emptied (acks committed).
- The log names the store alarm when it clears (it said "memory alarm cleared").
"""
from __future__ import annotations

import contextlib
import os
import resource
import time
from typing import Callable, Iterator

import pika
import pytest

from tests.support.amqp091_clients import pika_connection
from tests.support.gateway_process import GatewayProcess, default_config
from tests.support.small_filesystem import fill, small_filesystem

#: how long publishers keep trying against a full store before space is freed (the
#: store's recovery checks run every second: a flapping alarm shows within this)
OBSERVE = 8.0
BODY = bytes(4000)
PERSISTENT = pika.BasicProperties(delivery_mode=2)

pytestmark = pytest.mark.process  # kills and limits gateway processes


def _gateway(state_dir: str, reserve: int = 4 << 20, **kwargs) -> GatewayProcess:
    config = (f"state_dir: {state_dir}\nledger:\n  enabled: false\n"
              f"store:\n  disk_free_limit: 0\n  disk_reserve: {reserve}\n")
    return GatewayProcess(config_text=default_config(extra=config), **kwargs).start()


@contextlib.contextmanager
def _file_size_limit(tmp_path) -> Iterator[tuple[GatewayProcess, Callable[[], None]]]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 * 1024 * 1024, resource.RLIM_INFINITY))

    gw = _gateway(str(tmp_path), reserve=0, preexec_fn=limit)  # files cannot grow: no disk to reserve
    try:
        yield gw, lambda: resource.prlimit(gw.proc.pid, resource.RLIMIT_FSIZE,
                                           (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    finally:
        gw.kill()


@contextlib.contextmanager
def _small_disk(tmp_path) -> Iterator[tuple[GatewayProcess, Callable[[], None]]]:
    with small_filesystem(48 << 20) as directory:
        ballast = os.path.join(directory, "ballast")
        with open(ballast, "wb") as f:
            f.write(bytes(16 << 20))
        gw = _gateway(directory)
        try:
            yield gw, lambda: os.unlink(ballast)
        finally:
            gw.kill()


class _Publisher:
    """A publisher that resumes the moment it is unblocked (what made the alarm flap),
    recording connection.blocked and connection.unblocked."""

    def __init__(self, gw: GatewayProcess) -> None:
        self.conn = pika_connection(gw, blocked_connection_timeout=None)
        self.channel = self.conn.channel()
        self.channel.queue_declare("q", durable=True)
        self.events: list[str] = []
        self.conn.add_on_connection_blocked_callback(lambda *_: self.events.append("blocked"))
        self.conn.add_on_connection_unblocked_callback(lambda *_: self.events.append("unblocked"))

    @property
    def blocked(self) -> bool:
        return bool(self.events) and self.events[-1] == "blocked"

    def run(self, seconds: float, until: Callable[[], bool] = lambda: False) -> None:
        deadline = time.monotonic() + seconds
        sent = 0
        while time.monotonic() < deadline and not until():
            if self.blocked:
                self.conn.process_data_events(time_limit=0.1)
                continue
            self.channel.basic_publish("", "q", BODY, PERSISTENT)
            sent += 1
            if sent % 20 == 0:
                self.conn.process_data_events(time_limit=0)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("full", [_file_size_limit, _small_disk], ids=["file-size-limit", "tmpfs"])
def test_a_full_store_blocks_publishers_once_until_space_is_freed(tmp_path, full) -> None:
    with full(tmp_path) as (gw, free_space):
        publisher = _Publisher(gw)
        publisher.run(120, until=lambda: publisher.blocked)
        assert publisher.events == ["blocked"], "the store never filled up"
        publisher.run(OBSERVE)  # publishers keep trying: no unblock while nothing is freed
        assert publisher.events == ["blocked"]
        assert gw.count_log(r"store alarm set, blocking producers") == 1
        free_space()
        publisher.run(30, until=lambda: not publisher.blocked)
        assert publisher.events == ["blocked", "unblocked"]
        assert gw.wait_for_log(r"store alarm cleared, unblocking producers")
        assert "memory alarm" not in gw.log
        publisher.channel.confirm_delivery()
        publisher.channel.basic_publish("", "q", b"after", PERSISTENT)  # confirmed: stored again
        publisher.conn.close()


@pytest.mark.timeout(240)
def test_a_queue_is_emptied_after_a_restart_on_a_full_disk() -> None:
    with small_filesystem(32 << 20) as directory:
        gw = _gateway(directory)
        try:
            conn = pika_connection(gw)
            ch = conn.channel()
            ch.queue_declare("q", durable=True)
            ch.confirm_delivery()
            for i in range(500):
                ch.basic_publish("", "q", b"%06d" % i + BODY, PERSISTENT)
            conn.close()
        finally:
            gw.stop()
        fill(directory)  # something else fills the disk while the gateway is down
        gw = _gateway(directory)
        try:
            assert gw.wait_for_log(r"store alarm set, blocking producers: store writes fail: .*less than "
                                   r"4194304 bytes free")
            conn = pika_connection(gw)
            ch = conn.channel()
            assert ch.queue_declare("q", durable=True, passive=True).method.message_count == 500
            got = 0
            for method, _, _ in ch.consume("q", inactivity_timeout=5):
                if method is None:
                    break
                ch.basic_ack(method.delivery_tag)
                got += 1
            ch.cancel()
            assert got == 500
            conn.close()
        finally:
            gw.stop()
        gw = _gateway(directory)
        try:
            conn = pika_connection(gw)
            assert conn.channel().queue_declare("q", durable=True, passive=True).method.message_count == 0
            conn.close()
        finally:
            gw.stop()
