"""Twisted lives here and only here: listeners, the sniffer, the engine driver, HTTP,
systemd notification. Everything below this package is sans-I/O."""
