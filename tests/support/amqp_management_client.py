"""A small AMQP Management client over proton's blocking API (request/response with a
dynamic reply queue), as Qpid's ``qdmanage`` and Azure's clients speak it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from proton import Message
from proton.utils import BlockingConnection, SyncRequestResponse

__all__ = ["ManagementClient", "Reply"]


@dataclass
class Reply:
    status: int
    description: str
    body: Any
    properties: dict


class ManagementClient:
    def __init__(self, connection: BlockingConnection, node: str = "$management") -> None:
        self.rpc = SyncRequestResponse(connection, node)

    def call(self, operation: str, type: str = "org.amqp.management", name: Optional[str] = None,
             body: Any = None, **properties: Any) -> Reply:
        props = {"operation": operation, "type": type, "locales": "en-US", **properties}
        if name is not None:
            props["name"] = name
        response = self.rpc.call(Message(body=body, properties=props))
        reply_props = dict(response.properties or {})
        return Reply(reply_props.get("statusCode"), reply_props.get("statusDescription"), response.body,
                     reply_props)
