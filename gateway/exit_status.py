"""How a command of ``amqp-gateway`` ends: its exit statuses, and the one way a config
error is told (every problem on its own line, naming the key and its line in the file).

0 success, 1 a runtime failure (the gateway did not answer, a port in use), 2 an invalid
configuration or usage. ``gateway.cli`` documents what each command means by them."""
from __future__ import annotations

import sys

from gateway.config import ConfigError

__all__ = ["EXIT_OK", "EXIT_FAILURE", "EXIT_CONFIG", "print_config_errors"]

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2


def print_config_errors(exc: ConfigError) -> None:
    """Each of ``exc``'s problems on standard error, one line each."""
    for error in exc.errors:
        print(f"amqp-gateway: invalid config: {error}", file=sys.stderr)
