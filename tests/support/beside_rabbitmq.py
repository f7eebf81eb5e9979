"""Run inside a private network namespace (``unshare -rn``): a RabbitMQ on its default
ports 5672 and 15672, a gateway on other fixed ports, and the command-line tools run as
an operator runs them, with and without the gateway's config file. Prints one JSON
object: each run's arguments, exit status and output.

Why a namespace: on a shared machine the default ports may be taken (or be another
user's RabbitMQ); in a namespace of its own the loopback interface is empty, so the
tools' real defaults (127.0.0.1:5672, :15672, :9419) meet this RabbitMQ and nothing else,
with no test hook in the tools.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

from bench.reference import PrivateRabbit
from tests.support.gateway_process import REPO, password_hash

#: the gateway's ports in the namespace (the defaults are RabbitMQ's)
GATEWAY_AMQP, GATEWAY_METRICS, GATEWAY_MANAGEMENT = 5673, 9420, 15673
ADMIN, ADMIN_PASSWORD = "admin", "s3cret"

#: (label, arguments after ``amqp-gateway``, extra environment)
RUNS: list[tuple[str, list[str], dict[str, str]]] = [
    ("ping", ["ping", "--timeout", "5"], {}),
    ("ping --config", ["ping", "--config", "{config}"], {}),
    ("ping $AMQP_GATEWAY_CONFIG", ["ping"], {"AMQP_GATEWAY_CONFIG": "{config}"}),
    ("status", ["status"], {}),
    ("status --config", ["status", "--config", "{config}"], {}),
    ("ctl list queues", ["ctl", "-u", "guest", "-p", "guest", "list", "queues"], {}),
    ("ctl --config list queues",
     ["ctl", "--config", "{config}", "-u", ADMIN, "-p", ADMIN_PASSWORD, "list", "queues"], {}),
    ("ctl $AMQP_GATEWAY_CONFIG status", ["ctl", "-u", ADMIN, "-p", ADMIN_PASSWORD, "status"],
     {"AMQP_GATEWAY_CONFIG": "{config}"}),
]


def _config(state_dir: str) -> str:
    return textwrap.dedent(f"""\
        state_dir: {state_dir}
        listeners:
          - host: 127.0.0.1
            port: {GATEWAY_AMQP}
        metrics:
          host: 127.0.0.1
          port: {GATEWAY_METRICS}
        management:
          enabled: true
          host: 127.0.0.1
          port: {GATEWAY_MANAGEMENT}
        users:
          - name: {ADMIN}
            password_hash: "{password_hash(ADMIN_PASSWORD)}"
            tags: [administrator]
            permissions:
              /: {{configure: ".*", write: ".*", read: ".*"}}
        """)


def _start_gateway(config: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run", "--config", config],
                            cwd=os.path.dirname(config), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    log = []
    for line in proc.stdout:
        log.append(line)
        if " ready" in line and "gateway " in line:
            return proc
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError("the gateway did not start:\n" + "".join(log))


def main() -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory(prefix="beside-rabbit-") as tmp:
        config = os.path.join(tmp, "gateway.yaml")
        with open(config, "w") as f:
            f.write(_config(os.path.join(tmp, "var")))
        rabbit = PrivateRabbit(port=5672, management_port=15672).start()
        gateway = None
        try:
            gateway = _start_gateway(config)
            results = []
            for label, args, env in RUNS:
                run_env = dict(os.environ, PYTHONPATH=REPO)
                run_env.pop("AMQP_GATEWAY_CONFIG", None)
                run_env.update({k: v.format(config=config) for k, v in env.items()})
                done = subprocess.run([sys.executable, "-m", "gateway.cli",
                                       *[a.format(config=config) for a in args]],
                                      cwd=REPO, env=run_env, capture_output=True, text=True,
                                      timeout=60)
                results.append({"label": label, "status": done.returncode, "stdout": done.stdout,
                                "stderr": done.stderr})
            print(json.dumps({"rabbit_port": rabbit.port, "runs": results}))
        finally:
            if gateway is not None:
                gateway.terminate()
                gateway.wait(30)
            rabbit.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
