"""Edge mode: proxied vhosts, whose nodes live in a backend broker.

A client connection to a proxied vhost gets a backend connection of its own; what the
client does is carried to the backend and the backend's answers are carried back. This
package is sans-I/O and knows no protocol codec: it holds the settings (``settings``),
the contract between a client-facing engine and its backend connection (``contract``),
which node to try next and each backend's state (``nodes``), and the 1.0 <-> 0-9-1
mapping rules of addresses and outcomes (``mapping``). The protocol packages implement
the connections (``amqp091.backend_relay``, ``amqp091.backend_bridge``) and the edge
opens their sockets (``edge.backend``).
"""
from gateway.backend.settings import (BACKEND_KINDS, PASSTHROUGH, PROXIED_KINDS, BackendSettings,
                                      backend_problems, backends_problems, split_node)

__all__ = ["BACKEND_KINDS", "PASSTHROUGH", "PROXIED_KINDS", "BackendSettings", "backend_problems",
           "backends_problems", "split_node"]
