"""AMQP 0-9-1 (and 0-9) server engine: codec, content assembly and the connection machine;
and the client role a forwarder publishes to a partner's 0-9-1 broker with.

Sans-I/O: no sockets, no clock, no Twisted. ``spec`` is the one table of protocol
constants; ``methods`` builds one dataclass per method from it.
"""
from gateway.amqp091.client import ClientConnection
from gateway.amqp091.connection import ConnectionState, ServerConnection
from gateway.amqp091.handshake import SERVER_CAPABILITIES
from gateway.amqp091.content import Content, ContentAssembler, decode_properties, encode_properties
from gateway.amqp091.errors import AmqpException, ChannelException, ConnectionException, DecodeError
from gateway.amqp091.frames import (
    HEARTBEAT_FRAME,
    BodyFrame,
    Frame,
    FrameReader,
    HeaderFrame,
    HeartbeatFrame,
    MethodFrame,
    encode_content_frames,
    encode_frame,
    encode_method_frame,
)
from gateway.amqp091.handlers import (
    ChannelHandler,
    ChannelHandlerFactory,
    ChannelWriter,
    CloseInitiator,
    CloseReason,
    ConnectionContext,
)
from gateway.amqp091.methods import Method, decode_method, method_class
from gateway.amqp091.outbound_client import OutboundAmqp091
from gateway.amqp091.spec import (
    FRAME_END,
    FRAME_MIN_SIZE,
    REFUSED_CLASSES,
    ClassId,
    FrameType,
    ProtocolVersion,
    ReplyCode,
)
from gateway.amqp091.tuning import TuneParameters, negotiate

__all__ = [
    "AmqpException",
    "BodyFrame",
    "ChannelException",
    "ChannelHandler",
    "ChannelHandlerFactory",
    "ChannelWriter",
    "ClassId",
    "ClientConnection",
    "CloseInitiator",
    "CloseReason",
    "ConnectionContext",
    "ConnectionException",
    "ConnectionState",
    "Content",
    "ContentAssembler",
    "DecodeError",
    "FRAME_END",
    "FRAME_MIN_SIZE",
    "Frame",
    "FrameReader",
    "FrameType",
    "HEARTBEAT_FRAME",
    "HeaderFrame",
    "HeartbeatFrame",
    "Method",
    "MethodFrame",
    "OutboundAmqp091",
    "ProtocolVersion",
    "REFUSED_CLASSES",
    "ReplyCode",
    "SERVER_CAPABILITIES",
    "ServerConnection",
    "TuneParameters",
    "decode_method",
    "decode_properties",
    "encode_content_frames",
    "encode_frame",
    "encode_method_frame",
    "encode_properties",
    "method_class",
    "negotiate",
]
