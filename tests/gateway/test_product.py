"""What the gateway announces about itself comes from one place: the package's version."""
import os
import platform
import tomllib
from importlib.metadata import version

from gateway.product import PRODUCT, __version__, names_us, product_properties

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_version_is_the_installed_packages_as_pyproject_writes_it():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        written = tomllib.load(f)["project"]["version"]
    assert __version__ == version("amqp-gateway") == written


def test_product_properties():
    assert product_properties() == {
        "product": PRODUCT,
        "version": __version__,
        "platform": f"Python {platform.python_version()}",
    }
    assert PRODUCT == "amqp-gateway"
    assert product_properties()["platform"].startswith("Python 3.")


def test_product_properties_announcing_rabbitmq():
    props = product_properties("4.1.0")
    assert (props["product"], props["version"]) == ("RabbitMQ", "4.1.0")
    assert props["information"].startswith(f"{PRODUCT} {__version__}")


def test_names_us_by_product_or_by_the_information_of_a_gateway_announcing_rabbitmq():
    assert names_us(PRODUCT)
    props = product_properties("4.1.0")
    assert names_us(props["product"], props["information"])
    assert not names_us("RabbitMQ", "Licensed under the MPL 2.0. Website: https://rabbitmq.com")
    assert not names_us("RabbitMQ")
    assert not names_us("amqp-gateway-fork") and not names_us("", "amqp-gatewayish 1")
