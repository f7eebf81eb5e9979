"""The protocol-neutral broker model shared by the 0-9-1 and 1.0 engines.

Sans-I/O: no twisted, no clock (time-dependent operations take ``now`` in seconds), no
protocol imports. Errors are :class:`BrokerError` kinds that each protocol maps to its
own codes.
"""
from .broker import Broker
from .consumers import Consumer, ConsumerSet
from .errors import (
    AccessRefused,
    BrokerError,
    CommandInvalid,
    ErrorKind,
    FeatureNotImplemented,
    InvalidArgument,
    NotAllowed,
    NotFound,
    PreconditionFailed,
    ResourceLimitExceeded,
    ResourceLocked,
)
from .exchanges import (
    Binding,
    DefaultExchange,
    DestinationKind,
    DirectExchange,
    Exchange,
    ExchangeType,
    FanoutExchange,
    HeadersExchange,
    TopicExchange,
)
from .flow import BlockListener, CreditMode, CreditWindow, ProducerGate, PublishFlow
from .headers_match import MatchKind, headers_match
from .message import DeathReason, Encoding, MessageContainer
from .outcomes import DeliveryOutcome, OutcomeKind, apply_outcome, modified
from .policies import Policy, parse_policy
from .queue_arguments import Overflow, QueueArguments
from .queue_host import QueueHost
from .queues import MessageState, Queue, QueuedMessage
from .topic_index import TopicIndex
from .unroutable import UnroutableCounts, UnroutablePolicy
from .vhost import PREDECLARED_EXCHANGES, PublishResult, ServiceNode, VirtualHost
from .vhost_policies import LIMIT_NAMES

__all__ = [
    "LIMIT_NAMES",
    "Policy",
    "parse_policy",
    "AccessRefused",
    "Binding",
    "BlockListener",
    "Broker",
    "BrokerError",
    "CommandInvalid",
    "Consumer",
    "ConsumerSet",
    "CreditMode",
    "CreditWindow",
    "DeathReason",
    "DeliveryOutcome",
    "DefaultExchange",
    "DestinationKind",
    "DirectExchange",
    "Encoding",
    "ErrorKind",
    "Exchange",
    "ExchangeType",
    "FanoutExchange",
    "FeatureNotImplemented",
    "HeadersExchange",
    "InvalidArgument",
    "MatchKind",
    "MessageContainer",
    "MessageState",
    "NotAllowed",
    "NotFound",
    "OutcomeKind",
    "Overflow",
    "PREDECLARED_EXCHANGES",
    "PreconditionFailed",
    "ProducerGate",
    "PublishFlow",
    "PublishResult",
    "Queue",
    "QueueArguments",
    "QueueHost",
    "QueuedMessage",
    "ResourceLimitExceeded",
    "ResourceLocked",
    "ServiceNode",
    "TopicExchange",
    "TopicIndex",
    "UnroutableCounts",
    "UnroutablePolicy",
    "VirtualHost",
    "apply_outcome",
    "modified",
    "headers_match",
]
