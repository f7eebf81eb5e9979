"""The rate history: per-second rates between samples of lifetime counters, a ten-minute
window, never a negative rate."""
from __future__ import annotations

from gateway.management.rate_history import RATE_FIELDS, RateHistory


def test_rates_between_samples_within_the_window():
    counters = {"published": 0, "delivered": 0, "acked": 0, "forwarded": 0}
    history = RateHistory(lambda: counters, interval=5, window=600)
    history.sample(0)
    assert history.as_dict(0)["samples"] == []  # one sample: no rate yet
    counters.update(published=50, delivered=25, acked=10, forwarded=5)
    history.sample(5)
    answer = history.as_dict(5)
    assert (answer["interval"], answer["window"], answer["now"]) == (5, 600, 5)
    assert answer["samples"] == [{"at": 5, "published": 10.0, "delivered": 5.0, "acked": 2.0, "forwarded": 1.0}]


def test_a_counter_that_went_down_gives_zero_and_old_samples_go():
    counters = dict.fromkeys(RATE_FIELDS, 100)
    history = RateHistory(lambda: counters, interval=5, window=600)
    for at in range(0, 1000, 5):
        history.sample(at)
    counters["published"] = 0  # its queue was deleted
    history.sample(1000)
    samples = history.as_dict(1000)["samples"]
    assert len(samples) == 120 and samples[0]["at"] >= 400
    assert samples[-1]["published"] == 0
