"""What the gateway says about itself to clients: product, version, platform.

Both protocols announce it (0-9-1 ``connection.start`` server-properties, 1.0 ``open``
connection properties), as RabbitMQ, Qpid and Artemis do; clients log it and some
check it. The version is the installed package's (``pyproject.toml`` is the one place
it is written); from a source tree that is not installed it is ``0+unknown``.
"""
from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

__all__ = ["PRODUCT", "__version__", "product_properties", "names_us", "API_RABBITMQ_VERSION"]

PRODUCT = "amqp-gateway"

#: the RabbitMQ release whose management HTTP API (paths, fields, definitions) the
#: gateway's follows: the overview's ``rabbitmq_version`` when ``rabbitmq_version`` is not
#: configured (tools such as rabbitmqadmin read it to pick what they may ask)
API_RABBITMQ_VERSION = "3.10.8"

try:
    __version__ = version(PRODUCT)
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
    __version__ = "0+unknown"


def product_properties(rabbitmq_version: str = "") -> dict[str, str]:
    """``product``, ``version`` and ``platform`` (``Python 3.11.x``), the properties both
    protocols announce; the one place to change what the gateway claims to be.

    With ``rabbitmq_version`` (config ``rabbitmq_version``, read by both protocols),
    ``product`` is ``RabbitMQ`` and ``version`` that version: RabbitMQ 4's AMQP 1.0 client
    libraries refuse a server that does not say so, and 0-9-1 clients that check the
    product see the same. ``information`` then still names us."""
    if rabbitmq_version:
        return {
            "product": "RabbitMQ",
            "version": rabbitmq_version,
            "platform": f"Python {platform.python_version()}",
            "information": f"{PRODUCT} {__version__}, announcing RabbitMQ {rabbitmq_version} "
                           "for RabbitMQ's client libraries (rabbitmq_version)",
        }
    return {
        "product": PRODUCT,
        "version": __version__,
        "platform": f"Python {platform.python_version()}",
    }


def names_us(product: str, information: str = "") -> bool:
    """Whether a server that calls itself ``product`` (with ``information``, as both
    protocols announce and the HTTP API's overview says) is an amqp-gateway: by name, or
    by the ``information`` a gateway announcing RabbitMQ's name still carries. The one
    test the command-line tools use before trusting an answer."""
    return product == PRODUCT or information.startswith(PRODUCT + " ")
