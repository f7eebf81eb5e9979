"""The dashboard (issues 35 and 46) in Debian's headless Chromium against a real gateway
with real traffic over both protocols: an operator signs in on its page (no browser
dialog), reads what the management API says, drills into a queue and a connection, works
the publish -> get -> purge forms, closes a connection, administers users, vhosts and
permissions, and sees the last minutes' rates that the gateway sampled before the page
was opened. Opening it as ``http://user:pass@host/`` works. Screenshots are saved in
``test-artifacts/``."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import urllib.error
import urllib.request
from typing import Optional

import pika
import pytest
from proton import Message
from proton.utils import BlockingConnection

from tests.integration.test_forwarding_dead_letters import gateways  # noqa: F401 - a fixture
from tests.support.amqp091_clients import pika_connection, unique
from tests.support.browser import ARTIFACTS, chromium_page
from tests.support.cross_protocol_clients import pika_channel, pika_get
from tests.support.deadline import wait_until
from tests.support.management_http import call, management_gateway

pytestmark = pytest.mark.integration

ADMIN = ("admin", "s3cret")


#: ``management.sample_interval`` of the module's gateway (5 s by default)
SAMPLE_INTERVAL = 1


@pytest.fixture(scope="module")
def gw():
    gateway = management_gateway(extra=f"management:\n  sample_interval: {SAMPLE_INTERVAL}\n").start()
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


def screenshot(page, name: str) -> str:
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name)
    page.screenshot(path=path, full_page=True)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    return path


def sign_in(page, gw, user: str = ADMIN[0], password: str = ADMIN[1], query: str = "") -> None:
    """Through the sign-in page, as a person would."""
    page.goto(gw.management_url + "/" + query)
    page.wait_for_url("**/login")
    page.fill('input[name="username"]', user)
    page.fill('input[name="password"]', password)
    page.click('button[type="submit"]')
    page.wait_for_selector("#whoami:has-text('%s')" % user, timeout=20_000)


def notice_says(page, text: str) -> None:
    """Waits for the outcome line of the last action to read ``text`` exactly."""
    page.wait_for_function(
        "t => document.getElementById('notice').textContent === t", arg=text, timeout=20_000)


def queue_messages(gw, queue: str) -> int:
    return call(gw, "GET", f"/api/queues/%2F/{queue}").body["messages"]


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
        with chromium_page() as page:
            asked: list[str] = []
            page.on("request", lambda r: asked.append(r.url))
            sign_in(page, gw, query="?interval=400")
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
            screenshot(page, "dashboard.png")
            # nothing from the network: every request went to the gateway itself
            assert asked and all(url.startswith(gw.management_url + "/") for url in asked), asked
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
        with chromium_page() as page:
            sign_in(page, gw, query="dashboard?interval=2500")
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


def test_the_rate_history_was_sampled_before_the_page_opened(gw):
    """The chart is drawn from the gateway's own samples (a timer, every
    ``management.sample_interval``): traffic before the page is opened is on it at its
    first draw."""
    q = unique("dash-history")
    conn = pika_connection(gw, user="admin", password="s3cret")
    try:
        ch = conn.channel()
        ch.queue_declare(q)
        publish_091(conn, q, 30)
        got = 0
        while got < 10:  # delivered and acked counts too
            method, _, _ = ch.basic_get(q, auto_ack=False)
            ch.basic_ack(method.delivery_tag)
            got += 1

        def sampled() -> Optional[dict]:
            samples = call(gw, "GET", "/api/gateway/rates").body["samples"]
            return next((s for s in samples if s["published"] > 0 and s["acked"] > 0), None)
        sample = wait_until(sampled, timeout=20, what="a rate sample with the published messages")
        history = call(gw, "GET", "/api/gateway/rates").body
        assert history["window"] == 600 and history["interval"] == SAMPLE_INTERVAL
        assert set(sample) == {"at", "published", "delivered", "acked", "forwarded"}
        with chromium_page() as page:
            sign_in(page, gw, query="?interval=60000")  # no refresh after the first draw
            wait_refreshes(page, 1)
            assert int(page.get_attribute("#rates", "data-samples")) >= 1
            for series in ("published", "delivered", "acked"):
                assert page.query_selector(f'#rates polyline[data-series="{series}"]') is not None
            assert page.inner_text('#rates li[data-series="forwarded"]').startswith("Forwarded: ")
            screenshot(page, "dashboard-rates.png")
    finally:
        conn.close()
        call(gw, "DELETE", f"/api/queues/%2F/{q}")


def test_publish_get_purge_on_a_queue_s_page(gw):
    q = unique("dash-forms")
    assert call(gw, "PUT", f"/api/queues/%2F/{q}", {"durable": False}).status in (201, 204)
    try:
        with chromium_page() as page:
            sign_in(page, gw)
            wait_refreshes(page, 1)
            # drill down from the overview's queue table
            page.click(f'#queues tr[data-vhost="/"][data-name="{q}"] td[data-field="name"] a')
            page.wait_for_selector(f"#queue-name:has-text('{q}')")
            assert page.is_hidden("#view-overview")
            page.fill('#publish-form textarea[name="payload"]', "hello from the dashboard")
            page.fill('#publish-form input[name="content_type"]', "text/plain")
            page.click('#publish-form button[type="submit"]')
            notice_says(page, f"published to queue '{q}'")
            assert queue_messages(gw, q) == 1
            page.wait_for_selector('[data-queue="messages"]:has-text("1")')
            screenshot(page, "dashboard-publish.png")

            # get, requeued: the message is shown and stays in the queue
            page.select_option('#get-form select[name="ackmode"]', "ack_requeue_true")
            page.click('#get-form button[type="submit"]')
            notice_says(page, f"1 message(s) got from queue '{q}'")
            assert cell(page, "get-results", "1", "payload") == "hello from the dashboard"
            assert cell(page, "get-results", "1", "payload_bytes") == str(len("hello from the dashboard"))
            assert queue_messages(gw, q) == 1
            screenshot(page, "dashboard-get.png")

            page.click('#purge-form button[type="submit"]')
            notice_says(page, f"queue '{q}' purged")
            assert queue_messages(gw, q) == 0
            page.wait_for_selector('[data-queue="messages"]:has-text("0")')
            screenshot(page, "dashboard-purge.png")

            # a get on the empty queue says so
            page.click('#get-form button[type="submit"]')
            notice_says(page, f"0 message(s) got from queue '{q}'")
            assert page.query_selector("#get-results tbody tr") is None
    finally:
        call(gw, "DELETE", f"/api/queues/%2F/{q}")


def test_a_connection_s_page_and_closing_it(gw):
    name = unique("dash-client")
    conn = pika_connection(gw, user="admin", password="s3cret",
                           client_properties={"connection_name": name})
    try:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=7)
        listed = wait_until(lambda: next((c for c in call(gw, "GET", "/api/connections").body
                                          if c.get("user_provided_name") == name), None),
                            timeout=10, what="the connection listed")
        with chromium_page() as page:
            sign_in(page, gw)
            wait_refreshes(page, 1)
            page.click(f'#connections tr[data-name="{listed["name"]}"] td[data-field="name"] a')
            page.wait_for_selector(f'[data-connection="user_provided_name"]:has-text("{name}")')
            assert page.inner_text('[data-connection="user"]') == "admin"
            assert page.inner_text('[data-connection="protocol"]') == "AMQP 0-9-1"
            page.wait_for_selector('#connection-channels tbody tr')
            assert page.inner_text('#connection-channels td[data-field="prefetch_count"]') == "7"
            screenshot(page, "dashboard-connection.png")
            page.fill('#close-form input[name="reason"]', "maintenance")
            page.click('#close-form button[type="submit"]')
            notice_says(page, f"connection '{listed['name']}' closed")
            wait_until(lambda: all(c["name"] != listed["name"]
                                   for c in call(gw, "GET", "/api/connections").body),
                       timeout=10, what="the connection gone")
            assert page.url.endswith("#/")
    finally:
        if conn.is_open:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closed by the server already
                pass


def test_users_vhosts_and_permissions_admin(gw):
    user, vhost = unique("dash-user"), unique("dash-vhost")
    try:
        with chromium_page() as page:
            sign_in(page, gw)
            page.click('[data-nav="admin"]')
            page.wait_for_selector('#users tr[data-name="admin"]')
            page.fill('#user-form input[name="name"]', user)
            page.fill('#user-form input[name="password"]', "pw-" + user)
            page.fill('#user-form input[name="tags"]', "monitoring")
            page.click('#user-form button[type="submit"]')
            notice_says(page, f"user '{user}' saved")
            page.fill('#vhost-form input[name="name"]', vhost)
            page.click('#vhost-form button[type="submit"]')
            notice_says(page, f"vhost '{vhost}' added")
            page.fill('#permission-form input[name="user"]', user)
            page.fill('#permission-form input[name="vhost"]', vhost)
            page.fill('#permission-form input[name="write"]', "^amq\\.default$")
            page.click('#permission-form button[type="submit"]')
            notice_says(page, f"permissions of '{user}' in vhost '{vhost}' set")
            page.wait_for_selector(f'#permissions tr[data-name="{user}"]')
            assert cell(page, "users", user, "tags") == "monitoring"
            assert cell(page, "permissions", user, "write") == "^amq\\.default$"
            screenshot(page, "dashboard-admin.png")
            # through the API, as tools see it
            assert call(gw, "GET", f"/api/users/{user}").body["tags"] in (["monitoring"], "monitoring")
            assert call(gw, "GET", f"/api/vhosts/{vhost}").status == 200
            perms = call(gw, "GET", f"/api/permissions/{vhost}/{user}").body
            assert (perms["configure"], perms["write"], perms["read"]) == (".*", "^amq\\.default$", ".*")
            # the new user logs in (it has the monitoring tag)
            assert call(gw, "GET", "/api/overview", user=user, password="pw-" + user).status == 200

            page.click(f'#permissions tr[data-name="{user}"] button')
            notice_says(page, f"permissions of '{user}' in vhost '{vhost}' cleared")
            assert call(gw, "GET", f"/api/permissions/{vhost}/{user}").status == 404
            page.click(f'#users tr[data-name="{user}"] button')
            notice_says(page, f"user '{user}' deleted")
            assert call(gw, "GET", f"/api/users/{user}").status == 404
            page.click(f'#vhosts tr[data-name="{vhost}"] button')
            notice_says(page, f"vhost '{vhost}' deleted")
            assert call(gw, "GET", f"/api/vhosts/{vhost}").status == 404
    finally:
        call(gw, "DELETE", f"/api/users/{user}")
        call(gw, "DELETE", f"/api/vhosts/{vhost}")


def test_opened_as_user_pass_at_host(gw):
    """``http://user:pass@host/``: no "Request cannot be constructed from a URL that
    includes credentials", the dashboard is signed in and polls."""
    errors: list[str] = []
    with chromium_page() as page:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        port = gw.management_url.rsplit(":", 1)[1]
        page.goto(f"http://admin:s3cret@127.0.0.1:{port}/?interval=400")
        page.wait_for_selector("#whoami:has-text('admin')", timeout=20_000)
        wait_refreshes(page, 2)
        assert "updated" in page.inner_text("#status")
        assert not any("credentials" in e for e in errors), errors
        screenshot(page, "dashboard-user-pass-url.png")
        # signing out lands on the sign-in page without the URL's credentials: it stays there
        page.click("#logout")
        page.wait_for_url(f"http://127.0.0.1:{port}/login")
        assert page.evaluate("document.URL") == f"http://127.0.0.1:{port}/login"
        assert page.is_visible("#sign-in")


def test_a_page_leaves_the_test_s_thread_free_for_asyncio(gw):
    """The browser is shared by the tests of a process, and Playwright's loop runs in a
    thread of its own: after a page, ``asyncio.run`` works in the test's thread (a
    browser kept in that thread made it fail for the aio-pika tests that came later)."""
    with chromium_page() as page:
        page.goto(gw.management_url + "/login")
        assert page.is_visible("#sign-in")
        with pytest.raises(RuntimeError):
            asyncio.get_running_loop()                   # none while a page is open
    assert asyncio.run(asyncio.sleep(0, result="ran")) == "ran"
    with chromium_page() as page:                        # the next page: a fresh context
        page.goto(gw.management_url + "/login")
        assert page.evaluate("document.cookie") == ""


def test_sign_in_refusals_and_sign_out(gw):
    with chromium_page() as page:
        # the dashboard's page sends an unsigned-in browser to the sign-in page (no dialog)
        answer = page.goto(gw.management_url + "/")
        assert answer.status == 200 and page.url.endswith("/login")
        page.fill('input[name="username"]', "admin")
        page.fill('input[name="password"]', "wrong")
        page.click('button[type="submit"]')
        page.wait_for_selector("#error:not([hidden])")
        assert page.inner_text("#error") == "Login failed"
        # a user without a management tag is refused with the reason
        page.fill('input[name="username"]', "app")
        page.fill('input[name="password"]', "app")
        page.click('button[type="submit"]')
        page.wait_for_function("document.getElementById('error').textContent.includes('app')")
        assert "tag" in page.inner_text("#error")
        screenshot(page, "dashboard-sign-in-refused.png")
        sign_in(page, gw)
        page.click("#logout")
        page.wait_for_url("**/login")
        # signed out: the dashboard sends it back to the sign-in page
        page.goto(gw.management_url + "/")
        assert page.url.endswith("/login")


# -- the session's cookie and CSRF, as a browser's requests would carry them ---------------

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def raw(gw, method: str, path: str, body: bytes | None = None,
        headers: Optional[dict] = None) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(gw.management_url + path, data=body, method=method,
                                 headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def signed_in_cookie(gw) -> str:
    status, headers, _ = raw(gw, "POST", "/login", b"username=admin&password=s3cret",
                             {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 303 and headers["Location"] == "/"
    cookie = headers["Set-Cookie"]
    flags = [f.strip() for f in cookie.split(";")]
    assert "HttpOnly" in flags and "SameSite=Strict" in flags and "Path=/" in flags
    return flags[0]


def test_the_session_cookie_and_csrf():
    """Over the wire: the cookie's flags, writes that need the session's token, another
    site's origin refused, logout ends the session, basic auth unchanged for tools."""
    gateway = management_gateway().start()
    try:
        q = unique("dash-csrf")
        assert call(gateway, "PUT", f"/api/queues/%2F/{q}", {}).status in (201, 204)
        cookie = signed_in_cookie(gateway)
        status, _, body = raw(gateway, "GET", "/session", headers={"Cookie": cookie})
        session = json.loads(body)
        assert status == 200 and session["user"] == "admin" and session["signed_in"] is True
        token = session["csrf_token"]
        assert raw(gateway, "GET", "/api/overview", headers={"Cookie": cookie})[0] == 200
        # a write with the cookie alone (what another site's form could make) is refused
        status, _, body = raw(gateway, "DELETE", f"/api/queues/%2F/{q}/contents", headers={"Cookie": cookie})
        assert status == 403 and b"x-csrf-token" in body
        status, _, body = raw(gateway, "DELETE", f"/api/queues/%2F/{q}/contents", headers={
            "Cookie": cookie, "X-CSRF-Token": token, "Origin": "http://evil.example"})
        assert status == 403 and b"evil.example" in body
        assert raw(gateway, "DELETE", f"/api/queues/%2F/{q}/contents", headers={
            "Cookie": cookie, "X-CSRF-Token": token})[0] == 204
        # another site's sign-in form is refused
        assert raw(gateway, "POST", "/login", b"username=admin&password=s3cret",
                   {"Origin": "http://evil.example"})[0] == 403
        # tools: basic auth, challenged when missing, no CSRF token needed
        basic = "Basic " + base64.b64encode(b"admin:s3cret").decode()
        assert raw(gateway, "DELETE", f"/api/queues/%2F/{q}/contents",
                   headers={"Authorization": basic})[0] == 204
        status, headers, _ = raw(gateway, "GET", "/api/overview")
        assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="amqp-gateway management"'
        # the dashboard's own requests get no challenge (no browser dialog)
        status, headers, _ = raw(gateway, "GET", "/api/overview",
                                 headers={"X-Requested-With": "amqp-gateway-dashboard"})
        assert status == 401 and "WWW-Authenticate" not in headers
        # logout ends the session
        status, headers, _ = raw(gateway, "POST", "/logout", headers={"Cookie": cookie, "X-CSRF-Token": token})
        assert status == 204 and "Max-Age=0" in headers["Set-Cookie"]
        assert raw(gateway, "GET", "/api/overview", headers={"Cookie": cookie})[0] == 401
        status, headers, _ = raw(gateway, "GET", "/", headers={"Cookie": cookie})
        assert status == 303 and headers["Location"] == "/login"
        call(gateway, "DELETE", f"/api/queues/%2F/{q}")
    finally:
        gateway.stop()


# -- re-drive: a remote's dead letters back to its outbox, from the remotes table ----------

def test_redrive_from_the_remotes_table(gateways):
    """``gateways``: org-a (with the management API) forwarding to org-b."""
    a, b = gateways
    conn, ch = pika_channel(a)
    ch.confirm_delivery()
    ch.basic_publish("", "late-queue@org-b", b"poison", pika.BasicProperties(message_id="p-1", delivery_mode=2))
    conn.close()

    def org_b() -> dict:
        [found] = call(a, "GET", "/api/gateway/remotes").body
        return found
    wait_until(lambda: "amqp:not-found" in (org_b()["last_error"] or ""), timeout=15,
               what="the message dead-lettered at org-a")
    with chromium_page() as page:
        sign_in(page, a, query="?interval=400")
        page.wait_for_selector('#remotes tr[data-name="org-b"] td[data-field="last_error"]:has-text("not-found")')
        # the operator fixes the cause, then re-drives from the dashboard
        conn, ch = pika_channel(b)
        ch.queue_declare("late-queue", durable=True)
        conn.close()
        page.click('#remotes tr[data-name="org-b"] button')
        notice_says(page, "1 dead letter(s) of remote 'org-b' back in its outbox")
        conn, ch = pika_channel(b)
        try:
            _, props, body = pika_get(ch, "late-queue", timeout=15)
            assert (body, props.message_id) == (b"poison", "p-1")
        finally:
            conn.close()
        page.wait_for_selector('#remotes tr[data-name="org-b"] td[data-field="outbox_depth"]:has-text("0")')
        # the forwarded message is in the rate history's next sample (every 5 s), and on the chart
        wait_until(lambda: any(s["forwarded"] > 0 for s in call(a, "GET", "/api/gateway/rates").body["samples"]),
                   timeout=20, what="a rate sample with the forwarded message")
        page.wait_for_function(  # a point of the forwarded line above the chart's zero line
            """() => { const line = document.querySelector('#rates polyline[data-series="forwarded"]');
                       const zero = Number(document.querySelector('#rates line.grid').getAttribute('y1'));
                       return line && line.getAttribute('points').split(' ')
                           .some(p => Number(p.split(',')[1]) < zero); }""", timeout=20_000)
        screenshot(page, "dashboard-redrive.png")


def test_the_remotes_table_shows_each_remote_s_name_and_outbox_depth(tmp_path):
    """Issue 46: the table read ``name``/``backlog`` while the API gave ``container``/
    ``outbox_depth``, so both were blank."""
    from tests.integration.test_management_forwarding import FORWARDING
    password_file = tmp_path / "org-b.password"
    password_file.write_text("secret\n")
    gw = management_gateway(extra=FORWARDING.format(password_file=password_file)).start()
    try:
        with chromium_page() as page:
            sign_in(page, gw, query="?interval=400")
            wait_refreshes(page, 1)
            assert cell(page, "remotes", "org-b", "name") == "org-b"
            assert cell(page, "remotes", "org-b", "outbox_depth") == "0"
            assert cell(page, "remotes", "org-b", "state") in ("connecting", "backing off")
    finally:
        gw.stop()
