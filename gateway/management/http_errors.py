"""The management HTTP API's error answer: a status and RabbitMQ's error body.

RabbitMQ answers every failure with ``{"error": KIND, "reason": TEXT}`` (for instance
``{"error": "Object Not Found", "reason": "Not Found"}`` for 404, ``bad_request`` for
400, ``not_authorised`` for 401), and tools such as ``rabbitmqadmin`` print the
``reason``; so do we.
"""
from __future__ import annotations

__all__ = ["HttpError", "ERROR_KINDS"]

#: RabbitMQ's ``error`` value for each status it uses
ERROR_KINDS = {
    400: "bad_request",
    401: "not_authorised",
    403: "access_refused",
    404: "Object Not Found",
    405: "Method Not Allowed",
    409: "conflict",
    413: "payload_too_large",
    414: "uri_too_long",
    415: "Unsupported Media Type",
    429: "too_many_requests",
    431: "request_header_fields_too_large",
    500: "internal_error",
}


class HttpError(Exception):
    """An answer other than success; ``body()`` is its JSON object."""

    def __init__(self, status: int, error: str | None, reason: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status
        #: response headers the answer needs (``Retry-After`` of a 429)
        self.headers = headers or {}
        self.error = error or ERROR_KINDS.get(status, "error")
        self.reason = reason

    def body(self) -> dict[str, str]:
        return {"error": self.error, "reason": self.reason}
