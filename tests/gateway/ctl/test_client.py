"""``ctl``'s client tells the gateway's API from another server's (``gateway/ctl/client.py``):
by the overview's ``product_name``, or, when credentials are refused, by the realm of the
challenge. A small local HTTP server plays the other side."""
from __future__ import annotations

import http.server
import json
import threading

import pytest

from gateway.ctl.client import CredentialsRefused, ManagementClient, NotTheGateway


class _Server(http.server.BaseHTTPRequestHandler):
    status = 200
    body: dict = {}
    realm = ""

    def do_GET(self):
        raw = json.dumps(self.body).encode()
        self.send_response(self.status)
        if self.realm:
            self.send_header("WWW-Authenticate", f'Basic realm="{self.realm}"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


@pytest.fixture
def serve():
    servers = []

    def start(status: int, body: dict, realm: str = "") -> str:
        handler = type("Handler", (_Server,), {"status": status, "body": body, "realm": realm})
        server = http.server.HTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()


def test_the_gateway_s_overview_passes(serve):
    url = serve(200, {"product_name": "amqp-gateway", "product_version": "0.1.0"})
    assert ManagementClient(url).check_gateway()["product_name"] == "amqp-gateway"


def test_rabbitmq_s_overview_is_named(serve):
    url = serve(200, {"product_name": "RabbitMQ", "product_version": "3.10.8"})
    with pytest.raises(NotTheGateway) as info:
        ManagementClient(url).check_gateway()
    assert str(info.value).startswith(f"{url} is RabbitMQ 3.10.8, not amqp-gateway's management API")
    assert info.value.exit_status == 1


def test_a_refusal_from_another_realm_names_the_realm_not_the_credentials(serve):
    url = serve(401, {"error": "not_authorised"}, realm="RabbitMQ Management")
    with pytest.raises(NotTheGateway) as info:
        ManagementClient(url).check_gateway()
    assert 'asking for Basic realm="RabbitMQ Management"' in str(info.value)
    ours = serve(401, {"error": "not_authorised", "reason": "Login failed"},
                 realm="amqp-gateway management")
    with pytest.raises(CredentialsRefused):
        ManagementClient(ours).check_gateway()
