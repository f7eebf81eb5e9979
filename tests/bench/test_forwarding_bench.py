"""The forwarding bench's pieces that need no processes: the shovel it asks RabbitMQ for,
the load generators' arguments, and the table with the ratio per size."""
from __future__ import annotations

from bench.forwarding_bench import SHOVEL_PARAMETER, SIZES, Endpoint, Route, report, workload_key
from bench.report import GATEWAY, REFERENCE, Measurement


def test_the_reference_is_a_dynamic_shovel_acking_on_confirm_between_two_vhosts():
    assert SHOVEL_PARAMETER["ack-mode"] == "on-confirm"
    assert (SHOVEL_PARAMETER["src-uri"], SHOVEL_PARAMETER["dest-uri"]) == ("amqp:///src", "amqp:///dst")
    assert SHOVEL_PARAMETER["src-queue"] == SHOVEL_PARAMETER["dest-queue"]


def test_generators_connect_to_the_route_vhost():
    assert Endpoint("127.0.0.1", 5672, "src").argv() == ["--host", "127.0.0.1", "--port", "5672",
                                                         "--vhost", "src", "--user", "guest",
                                                         "--password", "guest"]


def test_the_table_gives_each_size_with_the_ratio_of_the_rounds():
    measurements = []
    for round_no, (gw, ref) in enumerate([(900.0, 9000.0), (1000.0, 8000.0), (1100.0, 10000.0)]):
        for size in SIZES:
            measurements.append(Measurement(workload_key(size), GATEWAY, round_no, gw, "msgs/s", 10.0, 20.0,
                                            100, 100))
            measurements.append(Measurement(workload_key(size), REFERENCE, round_no, ref, "msgs/s", 5.0, 9.0,
                                            100, 100))
    routes = [Route(GATEWAY, "gw a->b", Endpoint("h", 1), "fwd@org-b", Endpoint("h", 2)),
              Route(REFERENCE, "shovel", Endpoint("h", 3, "src"), "fwd", Endpoint("h", 3, "dst"))]
    text = report(measurements, routes)
    assert "F1 forward 100 B" in text and "F1 forward 4 KiB" in text
    assert "0.11 [0.10-0.12]" in text          # ratio per round: 0.10, 0.125, 0.11
