"""The live dashboard (issue 35) in Debian's headless Chromium against a real gateway with
real traffic over both protocols: what it shows matches the management API, it refreshes
by itself, and it needs the API's authentication. A screenshot is saved as an artefact."""
from __future__ import annotations

import os

import pytest
from proton import Message
from proton.utils import BlockingConnection

from tests.support.amqp091_clients import pika_connection, unique
from tests.support.browser import ARTIFACTS, chromium_page
from tests.support.management_http import call, management_gateway

pytestmark = pytest.mark.integration
PlaywrightError = pytest.importorskip("playwright.sync_api").Error

ADMIN = {"username": "admin", "password": "s3cret"}


@pytest.fixture(scope="module")
def gw():
    gateway = management_gateway().start()
    yield gateway
    gateway.stop()


def publish_091(conn, queue: str, count: int) -> None:
    ch = conn.channel()
    ch.confirm_delivery()
    for i in range(count):
        ch.basic_publish("", queue, b"m%d" % i)
    ch.close()


def cell(page, table: str, name: str, field: str, vhost: str | None = None) -> str:
    where = f'[data-vhost="{vhost}"]' if vhost is not None else ""
    return page.inner_text(f'#{table} tr{where}[data-name="{name}"] td[data-field="{field}"]')


def refreshes(page) -> int:
    return int(page.evaluate("Number(document.body.dataset.refreshed || 0)"))


def wait_refreshes(page, count: int) -> None:
    page.wait_for_function(f"Number(document.body.dataset.refreshed || 0) >= {count}",
                           timeout=20_000)


def test_the_dashboard_shows_what_the_api_says_and_keeps_up(gw):
    q_busy, q_idle = unique("dash-busy"), unique("dash-idle")
    conn091 = pika_connection(gw, user="admin", password="s3cret")
    conn10 = BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="admin", password="s3cret",
                                allowed_mechs="PLAIN", allow_insecure_mechs=True, timeout=10)
    try:
        ch = conn091.channel()
        ch.queue_declare(q_busy)
        ch.queue_declare(q_idle)
        publish_091(conn091, q_busy, 5)
        sender = conn10.create_sender(f"/queue/{q_idle}")
        for i in range(2):
            sender.send(Message(body=f"from 1.0 #{i}"))
        os.makedirs(ARTIFACTS, exist_ok=True)
        with chromium_page(http_credentials=ADMIN) as page:
            response = page.goto(gw.management_url + "/?interval=400")
            assert response.status == 200
            assert page.title() == "amqp-gateway"
            wait_refreshes(page, 1)
            connections = call(gw, "GET", "/api/connections").body
            protocols = sorted(c["protocol"] for c in connections)
            assert protocols == ["AMQP 0-9-1", "AMQP 1.0"]
            assert page.inner_text('[data-stat="connections"]') == "2"
            assert page.inner_text('[data-stat="connections_amqp091"]') == "1"
            assert page.inner_text('[data-stat="connections_amqp10"]') == "1"
            for c in connections:
                assert cell(page, "connections", c["name"], "protocol") == c["protocol"]
            # traffic after the first refresh: the next ones show the new depth and a rate
            before = refreshes(page)
            publish_091(conn091, q_busy, 3)
            wait_refreshes(page, before + 2)
            for q in (q_busy, q_idle):
                api = call(gw, "GET", f"/api/queues/%2F/{q}").body
                for field in ("messages", "messages_ready", "messages_unacknowledged", "consumers"):
                    assert cell(page, "queues", q, field, "/") == str(api[field])
            assert cell(page, "queues", q_busy, "messages", "/") == "8"
            assert cell(page, "queues", q_idle, "messages", "/") == "2"
            assert page.inner_text("#alarms") == "none"
            assert page.inner_text('[data-stat="queues"]') == str(
                len(call(gw, "GET", "/api/queues").body))
            assert "updated" in page.inner_text("#status")
            assert cell(page, "exchanges", "amq.topic", "type", "/") == "topic"
            shot = os.path.join(ARTIFACTS, "dashboard.png")
            page.screenshot(path=shot, full_page=True)
        with open(shot, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    finally:
        conn091.close()
        conn10.close()
        for q in (q_busy, q_idle):
            call(gw, "DELETE", f"/api/queues/%2F/{q}")


def test_the_rate_of_a_busy_queue_is_shown(gw):
    q = unique("dash-rate")
    conn = pika_connection(gw, user="admin", password="s3cret")
    try:
        conn.channel().queue_declare(q)
        with chromium_page(http_credentials=ADMIN) as page:
            page.goto(gw.management_url + "/dashboard?interval=2500")
            wait_refreshes(page, 1)
            publish_091(conn, q, 20)
            # the next refresh shows the 20 that came in since the last as a rate above 0
            # (and keeps it shown for the 2.5 s until the one after)
            page.wait_for_function(
                f'Number((document.querySelector(\'#queues tr[data-vhost="/"][data-name="{q}"] '
                f'td[data-field="publish_rate"]\') || {{}}).textContent || 0) > 0', timeout=20_000)
    finally:
        conn.close()
        call(gw, "DELETE", f"/api/queues/%2F/{q}")


def test_the_dashboard_needs_the_api_s_authentication(gw):
    with chromium_page() as page:
        answer = page.request.get(gw.management_url + "/")
        assert answer.status == 401
        assert answer.headers["www-authenticate"] == 'Basic realm="amqp-gateway management"'
    # a user without a management tag is refused again: Chromium shows the 401 answer or
    # gives up with ERR_INVALID_AUTH_CREDENTIALS (it does either); never the dashboard
    with chromium_page(http_credentials={"username": "app", "password": "app"}) as page:
        try:
            assert page.goto(gw.management_url + "/").status == 401
        except PlaywrightError as exc:
            assert "ERR_INVALID_AUTH_CREDENTIALS" in str(exc)
        assert page.query_selector("#queues") is None


def test_the_remotes_table_shows_each_remote_s_name_and_outbox_depth(tmp_path):
    """Issue 46: the table read ``name``/``backlog`` while the API gave ``container``/
    ``outbox_depth``, so both were blank."""
    from tests.integration.test_management_forwarding import FORWARDING
    password_file = tmp_path / "org-b.password"
    password_file.write_text("secret\n")
    gw = management_gateway(extra=FORWARDING.format(password_file=password_file)).start()
    try:
        with chromium_page(http_credentials=ADMIN) as page:
            page.goto(gw.management_url + "/?interval=400")
            wait_refreshes(page, 1)
            assert cell(page, "remotes", "org-b", "name") == "org-b"
            assert cell(page, "remotes", "org-b", "outbox_depth") == "0"
            assert cell(page, "remotes", "org-b", "state") in ("connecting", "backing off")
    finally:
        gw.stop()
