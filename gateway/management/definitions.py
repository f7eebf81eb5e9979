"""Everything management may change at run time beside the broker's entities: users and
permissions (``runtime_users``), vhosts, policies and vhost limits (``runtime_vhosts``),
loaded from the store at start-up (before the broker restores its queues) and saved to
it with every change."""
from __future__ import annotations

from typing import Callable, Iterable

from gateway.auth import User, UserDirectory
from gateway.broker import Broker, VirtualHost
from gateway.store import Store

from .runtime_users import RuntimeUsers
from .runtime_vhosts import RuntimeVhosts

__all__ = ["Definitions"]


class Definitions:
    """``directory``: the user directory logins use; ``base_users``/``base_vhosts``: the
    config file's (local vhosts); ``proxied``: the config's proxied vhosts (edge mode),
    which are not the broker's to create or delete; ``clock``: the broker's ``now``."""

    def __init__(self, broker: Broker, directory: UserDirectory, base_users: Iterable[User],
                 base_vhosts: Iterable[str], store: Store, clock: Callable[[], float],
                 proxied: Iterable[str] = ()) -> None:
        self._store = store
        self.users = RuntimeUsers(directory, base_users, store)
        self.vhosts = RuntimeVhosts(broker, base_vhosts, store, clock, proxied)

    def load(self) -> None:
        """The saved changes, in effect. Raises ``StoreUnusable`` for a damaged store."""
        records = self._store.load_definitions()
        self.vhosts.load(records)
        self.users.load(records)

    def delete_vhost(self, name: str) -> VirtualHost:
        """Delete a vhost and every permission on it (RabbitMQ does both)."""
        found = self.vhosts.delete_vhost(name)
        self.users.forget_vhost(name)
        return found
