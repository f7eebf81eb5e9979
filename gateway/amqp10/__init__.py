"""The AMQP 1.0 container role: our SASL layer in front of proton's engine, links glued
to the shared broker model.

``Amqp10Engine`` implements the engine surface driven by ``gateway.edge``.
"""
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition, SaslCode, Scope, from_broker_error
from gateway.amqp10.directory import VhostDirectory
from gateway.amqp10.engine import Amqp10Engine, EngineState
from gateway.amqp10.incoming_link import IncomingLink
from gateway.amqp10.link_context import INCOMING_CREDIT
from gateway.amqp10.outgoing_link import OutgoingLink
from gateway.amqp10.sasl import SaslResult, SaslServer, SaslState

__all__ = [
    "Amqp10Engine",
    "Amqp10Error",
    "ErrorCondition",
    "EngineState",
    "INCOMING_CREDIT",
    "IncomingLink",
    "OutgoingLink",
    "SaslCode",
    "SaslResult",
    "SaslServer",
    "SaslState",
    "Scope",
    "VhostDirectory",
    "from_broker_error",
]
