"""Vhosts, policies and vhost limits changed at run time: recorded, saved in the store and
put in effect in the broker.

The config file's ``vhosts`` are the starting set; a vhost created or deleted at run time
wins, across restarts, as users do (``gateway.auth.user_overlay``). Policies and limits
exist only at run time (the config file has none). Each change is a ``DefinitionRecord``
(kinds ``vhost``, ``policy``, ``vhost-limits``) written to the store, and applied at once:
a policy to the vhost's queues and exchanges, a limit to the next declare or connection.
At start-up ``load`` runs before the broker restores its durable queues, so they come
back with their policies in effect.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Mapping, Optional

from gateway.broker import Broker, VirtualHost, parse_policy
from gateway.store import DefinitionRecord, Store

from .errors import BadRequest, Conflict, EntityNotFound, ManagementError, translated

__all__ = ["RuntimeVhosts", "VHOST", "POLICY", "VHOST_LIMITS", "vhost_metadata"]

log = logging.getLogger(__name__)

#: ``DefinitionRecord.kind`` of each
VHOST, POLICY, VHOST_LIMITS = "vhost", "policy", "vhost-limits"
#: a vhost's metadata fields (RabbitMQ's) and their defaults
_METADATA = {"description": "", "tags": [], "default_queue_type": "classic"}


def vhost_metadata(body: Mapping[str, Any]) -> dict[str, Any]:
    """The vhost fields a request or a definitions file gives (only those): ``description``,
    ``tags`` (a list, or text separated by commas) and ``default_queue_type``, at the top
    or in ``metadata`` (RabbitMQ 3.11's form). Raises ``BadRequest`` naming a field of the
    wrong type."""
    given = dict(body.get("metadata") or {}) if isinstance(body.get("metadata"), Mapping) else {}
    given.update({k: body[k] for k in _METADATA if k in body})
    out: dict[str, Any] = {}
    if "description" in given:
        if not isinstance(given["description"], str):
            raise BadRequest(f"description must be text, not {given['description']!r}")
        out["description"] = given["description"]
    if "tags" in given:
        tags = given["tags"]
        if isinstance(tags, str):
            tags = [t.strip() for t in tags.split(",") if t.strip()]
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise BadRequest(f"tags must be a list of names or text separated by commas, not {tags!r}")
        out["tags"] = tags
    if "default_queue_type" in given:
        queue_type = given["default_queue_type"]
        if queue_type not in (None, "undefined", "classic"):
            raise BadRequest(f"default_queue_type {queue_type!r} is not supported (only classic)")
        out["default_queue_type"] = "classic"
    return out


def _policy_key(vhost: str, name: str) -> str:
    return json.dumps([vhost, name])


class RuntimeVhosts:
    """``base``: the config's vhost names."""

    def __init__(self, broker: Broker, base: Iterable[str], store: Store, clock: Any,
                 proxied: Iterable[str] = ()) -> None:
        self._broker = broker
        self._base = tuple(base)
        self._proxied = frozenset(proxied)
        self._store = store
        self._clock = clock
        self._vhosts: dict[str, Optional[dict[str, Any]]] = {}
        #: (vhost, name) -> the policy as RabbitMQ's JSON
        self._policies: dict[tuple[str, str], dict[str, Any]] = {}
        self._limits: dict[str, dict[str, int]] = {}

    # ------------------------------------------------------------------ start
    def load(self, records: Iterable[DefinitionRecord]) -> None:
        """Take the saved changes and put them in effect (before the broker's restore).
        A saved policy or limit the broker now refuses (a damaged or hand-edited store)
        is logged and left out rather than stopping the gateway."""
        for record in records:
            if record.kind == VHOST:
                self._vhosts[record.key] = record.value
            elif record.kind == POLICY and record.value is not None:
                vhost, name = json.loads(record.key)
                self._policies[(vhost, name)] = record.value
            elif record.kind == VHOST_LIMITS and record.value is not None:
                self._limits[record.key] = dict(record.value)
        for name, meta in self._vhosts.items():
            if meta is None:
                if self._broker.vhost(name) is not None:
                    self._broker.remove_vhost(name)
            else:
                self._broker.add_vhost(name)
        now = self._clock()
        for (vhost, name), body in sorted(self._policies.items()):
            try:
                self._apply_policy(vhost, name, body, now)
            except ManagementError as exc:
                log.warning("saved policy '%s' of vhost '%s' not applied: %s", name, vhost, exc.text)
        for vhost, limits in self._limits.items():
            try:
                with translated:
                    self._vhost(vhost).limits.replace(limits)
            except ManagementError as exc:
                log.warning("saved limits of vhost '%s' not applied: %s", vhost, exc.text)

    def _apply_policy(self, vhost: str, name: str, body: Mapping[str, Any], now: float) -> bool:
        found = self._vhost(vhost)
        with translated:
            return found.policies.put(parse_policy(vhost, name, body), now)

    # ------------------------------------------------------------------ vhosts
    def metadata(self, name: str) -> dict[str, Any]:
        """A vhost's description, tags and default queue type (defaults for the config's)."""
        return dict(_METADATA, **(self._vhosts.get(name) or {}))

    def put_vhost(self, name: str, metadata: Mapping[str, Any]) -> bool:
        """Create a vhost, or change the metadata fields given; True when it is new."""
        if not name:
            raise BadRequest("a vhost needs a name")
        self._refuse_proxied(name)
        created = self._broker.vhost(name) is None
        merged = dict(_METADATA if created else self.metadata(name), **metadata)
        if not created and merged == self.metadata(name):
            return False  # nothing changes: nothing recorded
        self._vhosts[name] = merged
        self._store.save_definition(DefinitionRecord(VHOST, name, merged))
        self._broker.add_vhost(name)
        return created

    def delete_vhost(self, name: str) -> VirtualHost:
        """Delete a vhost with its queues, exchanges, policies and limits; returns it.
        EntityNotFound when there is none."""
        self._refuse_proxied(name)
        found = self._broker.vhost(name)
        if found is None:
            raise EntityNotFound(f"no vhost '{name}'")
        for vhost, policy in [k for k in self._policies if k[0] == name]:
            del self._policies[(vhost, policy)]
            self._store.delete_definition(POLICY, _policy_key(vhost, policy))
        if self._limits.pop(name, None) is not None:
            self._store.delete_definition(VHOST_LIMITS, name)
        if name in self._base:
            self._vhosts[name] = None
            self._store.save_definition(DefinitionRecord(VHOST, name, None))
        else:
            self._vhosts.pop(name, None)
            self._store.delete_definition(VHOST, name)
        with translated:
            self._broker.remove_vhost(name)
        return found

    def _refuse_proxied(self, name: str) -> None:
        if name in self._proxied:
            raise Conflict(f"vhost '{name}' is proxied to a backend (the config file's vhosts[]."
                           "backend): change it there, or the backend's own vhosts")

    # ------------------------------------------------------------------ policies
    def policies(self, vhost: Optional[str] = None) -> list[dict[str, Any]]:
        """Policies as RabbitMQ lists them (by vhost, then name)."""
        return [v.as_dict() for name, found in sorted(self._broker.vhosts.items())
                if vhost is None or name == vhost for v in found.policies]

    def put_policy(self, vhost: str, name: str, body: Mapping[str, Any]) -> bool:
        """Set a policy (checked first: a bad one changes nothing); True when new."""
        policy_body = {k: body[k] for k in ("pattern", "definition", "apply-to", "priority") if k in body}
        created = self._apply_policy(vhost, name, policy_body, self._clock())
        applied = self._broker.vhost(vhost).policies.get(name)  # type: ignore[union-attr]
        saved = {k: v for k, v in applied.as_dict().items() if k not in ("vhost", "name")}  # type: ignore[union-attr]
        self._policies[(vhost, name)] = saved
        self._store.save_definition(DefinitionRecord(POLICY, _policy_key(vhost, name), saved))
        return created

    def delete_policy(self, vhost: str, name: str) -> bool:
        found = self._broker.vhost(vhost)
        if found is None or not found.policies.remove(name, self._clock()):
            return False
        self._policies.pop((vhost, name), None)
        self._store.delete_definition(POLICY, _policy_key(vhost, name))
        return True

    # ------------------------------------------------------------------ limits
    def limits(self, vhost: Optional[str] = None) -> list[dict[str, Any]]:
        """``[{"vhost": V, "value": {"max-queues": n, ...}}]`` for vhosts with limits."""
        return [{"vhost": name, "value": found.limits.as_dict()}
                for name, found in sorted(self._broker.vhosts.items())
                if (vhost is None or name == vhost) and found.limits.as_dict()]

    def put_limit(self, vhost: str, name: str, value: Any) -> None:
        found = self._vhost(vhost)
        values = dict(found.limits.as_dict(), **{name: value})
        self._set_limits(found, values)

    def delete_limit(self, vhost: str, name: str) -> bool:
        found = self._vhost(vhost)
        values = found.limits.as_dict()
        if values.pop(name, None) is None:
            return False
        self._set_limits(found, values)
        return True

    def replace_limits(self, vhost: str, values: Mapping[str, Any]) -> None:
        """All of a vhost's limits at once (a definitions import)."""
        self._set_limits(self._vhost(vhost), dict(values))

    def _vhost(self, name: str) -> VirtualHost:
        found = self._broker.vhost(name)
        if found is None:
            raise EntityNotFound(f"no vhost '{name}'")
        return found

    def _set_limits(self, found: VirtualHost, values: dict[str, Any]) -> None:
        with translated:
            found.limits.replace(values)
        if values:
            self._limits[found.name] = dict(values)
            self._store.save_definition(DefinitionRecord(VHOST_LIMITS, found.name, dict(values)))
        elif self._limits.pop(found.name, None) is not None:
            self._store.delete_definition(VHOST_LIMITS, found.name)

