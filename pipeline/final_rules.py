"""The final state of every message in a ledger: the rules, written once as data, and
their evaluation in plain Python (``final_states``). The report's Spark job
(``settlement``) builds its columns from the same tables, so both give the same answer
(``tests/pipeline/test_settlement.py`` runs both on one ledger); tests that check a
live gateway's ledger many times use the Python one, without starting Spark.

A message *copy* is one message in one place: a queue (routing can put a message in
several, each copy has its own fate), or ``-> peer`` for a message forwarded to another
gateway. A message that reached no place at all (unroutable, refused, ...) has one row
with no place. Each copy, and each such message, has exactly one state of ``STATES``:

- ``delivered``: a consumer settled it accepted or rejected (a rejection without a
  dead-letter exchange ends it as well); a message routed to a service node;
- ``expired``: its TTL ran out and no dead-letter exchange took it;
- ``dead-lettered``: it left for a dead-letter exchange (with the reason), or, forwarded,
  was dead-lettered at the source (the peer rejected it, ...);
- ``purged``, ``deleted`` (with its queue), ``dropped`` (overflow; a stop that did not
  keep it; not kept in the store over a restart; unroutable, returned or refused);
- ``forwarded``: the peer settled it;
- ``still queued``: none of the above yet (in the queue, or in the forwarding outbox);
- ``lost``: kept in the store (``stored_to``) when a restart happened after its last
  event, and not ``restored`` by that start: nothing explains where it went.

A copy moved by management to another queue carries on there (same gateway id): its row
in the old queue (``moved``) is not a final state and is left out.

Restarts: every start records ``started`` before it restores the store's messages, each
as ``restored``. A queue copy whose last event is older than its gateway's latest start
and that was not restored at or after it is gone: ``lost`` if it was stored, else
``dropped`` (a transient message or queue after a crash; a clean stop records the drop
itself). Forward copies are exempt: the outbox is always stored, and sends again.

Rules are ``(state, conditions, detail)``: the first whose conditions all hold gives
the state and its detail. A condition is ``(name, op, value)`` with op ``>`` (than a
number, or than the figure a text value names), ``==``, ``set`` (not null) or ``unset``
(null), over the copy's figures (``COUNTS``, ``VALUES``, ``DERIVED``); a detail is text
parts and ``(name, default)`` parts.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

__all__ = ["COPYING_EVENTS", "COUNTS", "COPY_RULES", "FINAL_OUTCOMES", "FORWARD_EVENTS",
           "FORWARD_PREFIX", "MESSAGE_RULES", "NOT_FINAL", "QUEUE_EVENTS", "STATES", "VALUES",
           "VERDICTS", "final_states", "places"]

STATES = ("delivered", "expired", "dead-lettered", "purged", "deleted", "dropped", "forwarded",
          "still queued", "lost")
#: states in which a message is not where its publisher meant it to end (the report's
#: "not finally settled")
NOT_FINAL = ("still queued", "dead-lettered", "expired", "purged", "deleted", "dropped", "lost")
#: settle outcomes after which a copy is done
FINAL_OUTCOMES = ("accepted", "rejected")
FORWARD_PREFIX = "-> "

#: events whose ``routed_to`` puts a copy in each queue named: the kind it counts as there
COPYING_EVENTS = {"routed": "routed", "moved": "moved_in"}
#: events of the copy in their ``queue`` (a move: of the queue it left)
QUEUE_EVENTS = ("delivered", "settled", "expired", "dead_lettered", "purged", "deleted",
                "dropped", "restored", "moved")
#: events of a forward copy (``-> peer_container``) when they name no queue
FORWARD_EVENTS = ("forwarded", "forward_settled", "dead_lettered")
#: the routing verdicts of a message
VERDICTS = ("routed", "unroutable", "returned", "refused")
_SETTLES = ("settled", "forward_settled")

#: copy figure -> (kinds counted, outcomes they must have, or None for any)
COUNTS: dict[str, tuple[tuple[str, ...], Optional[tuple[str, ...]]]] = {
    "sent": (("delivered", "forwarded"), None),
    "settlements": (_SETTLES, None),
    "final": (_SETTLES, FINAL_OUTCOMES),
    "expired": (("expired",), None),
    "dead_lettered": (("dead_lettered",), None),
    "purged": (("purged",), None),
    "deleted": (("deleted",), None),
    "dropped": (("dropped",), None),
    "moved_out": (("moved",), None),
}
#: copy figure -> (kinds, whether their outcome is final (True/False/None: any), field):
#: the greatest value of the field among those events
VALUES: dict[str, tuple[tuple[str, ...], Optional[bool], str]] = {
    "death_reason": (("dead_lettered",), None, "reason"),
    "dlx": (("dead_lettered",), None, "exchange"),
    "copy_of_death": (("routed",), None, "reason"),
    "given_back": (_SETTLES, False, "outcome"),
    "final_outcome": (_SETTLES, True, "outcome"),
    "drop_reason": (("dropped",), None, "reason"),
}
#: the figures made of the others (``settlement`` and ``final_states`` compute them alike):
#: ``is_forward`` (the place is ``-> peer``), ``stored`` (a routing put it in the store),
#: ``gone_at_restart`` (a queue copy older than its gateway's latest start and not
#: restored at or after it)
DERIVED = ("is_forward", "stored", "gone_at_restart")

_Rule = tuple[str, tuple[tuple[str, str, Any], ...], tuple[Any, ...]]
_WHERE_NOW = (
    ((("sent", "==", 0),), ("never delivered",)),
    ((("sent", ">", "settlements"),), ("delivered, unsettled at the end of the ledger",)),
    ((), ("given back by a consumer (", ("given_back", "released"), ")")),
)

#: the rules of a copy, first match wins
COPY_RULES: tuple[_Rule, ...] = (
    ("dead-lettered", (("dead_lettered", ">", 0), ("is_forward", "==", True)),
     ("at the source: ", ("death_reason", "?"))),
    ("dead-lettered", (("dead_lettered", ">", 0),),
     ("reason ", ("death_reason", "?"), ", to exchange '", ("dlx", ""), "'")),
    ("expired", (("expired", ">", 0),), ("TTL ran out, no dead-letter exchange",)),
    ("forwarded", (("final", ">", 0), ("is_forward", "==", True)),
     ("settled ", ("final_outcome", "?"), " by the peer")),
    ("delivered", (("final", ">", 0),), ("settled ", ("final_outcome", "?"))),
    ("purged", (("purged", ">", 0),), ("purged",)),
    ("deleted", (("deleted", ">", 0),), ("its queue was deleted",)),
    ("dropped", (("dropped", ">", 0),), ("by the queue: ", ("drop_reason", "?"))),
    ("moved", (("moved_out", ">", 0),), ("moved to another queue",)),
    ("lost", (("gone_at_restart", "==", True), ("stored", "==", True)),
     ("kept in the store, not restored at the gateway's next start",)),
    ("dropped", (("gone_at_restart", "==", True),),
     ("at a restart: not kept in the store (a transient message or queue)",)),
    ("still queued", (("is_forward", "==", True), ("settlements", "==", 0)),
     ("not settled by the peer",)),
    ("still queued", (("is_forward", "==", True),),
     ("given back by the peer (", ("given_back", "released"), ")")),
    *(("still queued", (("copy_of_death", "set", None), *when),
       ("dead-letter copy (", ("copy_of_death", ""), "), ", *text)) for when, text in _WHERE_NOW),
    *(("still queued", when, text) for when, text in _WHERE_NOW),
)

#: the rules of a message that reached no place (figures: ``verdict``, ``reason``,
#: ``global_address``: its routing key names ``node@container``)
MESSAGE_RULES: tuple[_Rule, ...] = (
    ("dropped", (("verdict", "==", "unroutable"),), ("unroutable: no queue took it",)),
    ("dropped", (("verdict", "==", "returned"),),
     ("returned to the publisher (", ("reason", "NO_ROUTE"), ")")),
    ("dropped", (("verdict", "==", "refused"),), ("refused: ", ("reason", "?"))),
    ("still queued", (("verdict", "==", "routed"), ("global_address", "==", True)),
     ("in the forwarding outbox, not sent yet",)),
    ("delivered", (("verdict", "==", "routed"),), ("to a service node",)),
    ("dropped", (), ("no routing verdict (a transaction that was not committed)",)),
)


def places(event: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """(place, kind, stored) for each copy an event (an ``events`` row) concerns."""
    kind = event["event"]
    out = []
    if kind in COPYING_EVENTS:
        stored = set(event.get("stored_to") or ())
        out += [(q, COPYING_EVENTS[kind], q in stored) for q in event.get("routed_to") or ()]
    if kind in QUEUE_EVENTS and event.get("queue") is not None:
        out.append((event["queue"], kind, False))
    elif kind in FORWARD_EVENTS and event.get("peer_container") is not None \
            and event.get("queue") is None:
        out.append((FORWARD_PREFIX + event["peer_container"], kind, False))
    return out


def holds(condition: tuple[str, str, Any], figures: Mapping[str, Any]) -> bool:
    name, op, value = condition
    have = figures.get(name)
    if op == "set":
        return have is not None
    if op == "unset":
        return have is None
    if op == ">" and isinstance(value, str):
        value = figures[value]
    if have is None:
        return False
    return have > value if op == ">" else have == value


def apply(rules: Sequence[_Rule], figures: Mapping[str, Any]) -> tuple[str, str]:
    """(state, detail) by the first rule that holds."""
    for state, conditions, parts in rules:
        if all(holds(c, figures) for c in conditions):
            return state, "".join(p if isinstance(p, str) else
                                  str(figures[p[0]]) if figures.get(p[0]) is not None else p[1]
                                  for p in parts)
    raise ValueError("no rule matched")  # the last rules have no condition


def _greatest(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def final_states(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each copy's (and each message without one) final state, from ``events`` rows (as
    ``tests/support/ledger_files.read_events`` gives them: columns that are not null):
    dicts of container, vhost, place (None for a message without a copy), state, detail,
    gateway_id, message_id, size, since_us, last_us. Moved-away copies are left out."""
    events = [e for e in events if e.get("gateway_id") is not None or e["event"] == "started"]
    latest_start: dict[Any, int] = {}
    copies: dict[tuple, list[tuple[str, bool, Mapping[str, Any]]]] = {}
    for e in events:
        if e["event"] == "started":
            latest_start[e.get("container")] = max(latest_start.get(e.get("container"), 0), e["ts_us"])
            continue
        for place, kind, stored in places(e):
            copies.setdefault((e.get("container"), str(e["gateway_id"]), place), []).append((kind, stored, e))
    out = []
    for (container, gid, place), got in copies.items():
        figures: dict[str, Any] = {}
        for name, (kinds, outcomes) in COUNTS.items():
            figures[name] = sum(1 for kind, _, e in got if kind in kinds
                                and (outcomes is None or e.get("outcome") in outcomes))
        for name, (kinds, final, field) in VALUES.items():
            figures[name] = _greatest(e.get(field) for kind, _, e in got if kind in kinds and (
                final is None or (e.get("outcome") in FINAL_OUTCOMES) == final))
        last = _greatest(e["ts_us"] for kind, _, e in got if kind != "restored")
        restored = _greatest(e["ts_us"] for kind, _, e in got if kind == "restored")
        start = latest_start.get(container)
        figures["is_forward"] = place.startswith(FORWARD_PREFIX)
        figures["stored"] = any(stored for _, stored, _ in got)
        figures["gone_at_restart"] = (not figures["is_forward"] and start is not None
                                      and last is not None and start > last
                                      and (restored is None or restored < start))
        state, detail = apply(COPY_RULES, figures)
        if state == "moved":
            continue
        out.append(_row(container, place, state, detail, gid, [e for _, _, e in got]))
    with_copy = {(c, g) for c, g, _ in copies}
    messages: dict[tuple, list[Mapping[str, Any]]] = {}
    for e in events:
        key = (e.get("container"), str(e.get("gateway_id")))
        if e["event"] in ("received",) + VERDICTS and key not in with_copy:
            messages.setdefault(key, []).append(e)
    for (container, gid), got in messages.items():
        if not any(e["event"] == "received" for e in got):
            continue
        verdicts = [e for e in got if e["event"] in VERDICTS]
        figures = {"verdict": _greatest(e["event"] for e in verdicts),
                   "reason": _greatest(e.get("reason") for e in verdicts),
                   "global_address": any("@" in (e.get("routing_key") or "") for e in got)}
        state, detail = apply(MESSAGE_RULES, figures)
        out.append(_row(container, None, state, detail, gid, got))
    return out


def _row(container: Any, place: Optional[str], state: str, detail: str, gid: str,
         got: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"container": container, "vhost": _greatest(e.get("vhost") for e in got),
            "place": place, "state": state, "detail": detail, "gateway_id": gid,
            "message_id": _greatest(e.get("message_id") for e in got),
            "size": _greatest(e.get("size") for e in got),
            "since_us": min(e["ts_us"] for e in got), "last_us": max(e["ts_us"] for e in got)}
