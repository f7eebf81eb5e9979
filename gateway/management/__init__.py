"""Management: one model over the broker (``model``) and the faces that speak it.

``ManagementModel`` reads and changes the broker with RabbitMQ's field names and the
protocols' permissions; its errors (``errors``) carry HTTP-like statuses.
"""
from .errors import BadRequest, Conflict, EntityNotFound, Forbidden, ManagementError, NotImplementedHere
from .model import ManagementModel

__all__ = ["BadRequest", "Conflict", "EntityNotFound", "Forbidden", "ManagementError", "ManagementModel",
           "NotImplementedHere"]
