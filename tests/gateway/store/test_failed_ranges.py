"""FailedRanges: each failure held once whichever report brings it first, and the ranges
no callback can ask about merged (never dropped) once too many are held."""
from __future__ import annotations

from gateway.store.errors import StoreWriteFailed
from gateway.store.failed_ranges import HELD, FailedRanges


def spans(failed: FailedRanges) -> list[tuple[int, int]]:
    return sorted((low, high) for low, high, _ in failed.ranges)


def test_a_range_from_both_reports_is_held_once_in_either_order() -> None:
    e = StoreWriteFailed("disk I/O error", full=False)
    written_first = FailedRanges()
    written_first.record(5, 5, e, floor=5)  # the commit's report
    written_first.record(5, 5, e, floor=5)  # the sync's, for the same group
    committed_first = FailedRanges()
    committed_first.record(5, 7, e, floor=5)
    committed_first.record(6, 6, e, floor=5)
    assert spans(written_first) == [(5, 5)] and spans(committed_first) == [(5, 7)]


def test_only_the_generations_not_known_yet_are_added() -> None:
    """A sync that failed after a group whose commit failed: the sync's range covers the
    earlier good groups too, and only they are added, with the sync's error."""
    commit_error, sync_error = StoreWriteFailed("disk full", full=True), StoreWriteFailed("EIO", full=False)
    failed = FailedRanges()
    failed.record(7, 7, commit_error, floor=5)
    failed.record(5, 8, sync_error, floor=5)
    assert spans(failed) == [(5, 6), (7, 7), (8, 8)]
    assert failed.error_of(7) is commit_error
    assert failed.error_of(5) is sync_error and failed.error_of(8) is sync_error
    assert failed.error_of(4) is None and failed.error_of(9) is None


def test_past_the_limit_the_ranges_below_the_floor_become_one() -> None:
    failed = FailedRanges()
    for n in range(HELD):  # failed generations 2, 4, 6 ...: good ones between
        failed.record(2 * n + 2, 2 * n + 2, StoreWriteFailed(f"failure {n}", full=False), floor=2 * n + 2)
    assert len(failed.ranges) == HELD
    failed.record(1000, 1000, StoreWriteFailed("later", full=False), floor=1000)
    assert spans(failed) == [(2, 2 * HELD), (1000, 1000)]
    # merged, not dropped: an entry written in any of those generations is not on disk
    assert failed.any_of(2) and failed.any_of(2 * HELD) and failed.any_of(3)
    assert not failed.any_of(1, 999, 1001)


def test_ranges_a_waiting_callback_may_ask_about_stay_as_they_are() -> None:
    failed = FailedRanges()
    errors = [StoreWriteFailed(f"failure {n}", full=False) for n in range(HELD + 2)]
    for n, error in enumerate(errors):
        failed.record(n + 10, n + 10, error, floor=10)  # a callback waits for generation 10
    assert len(failed.ranges) == HELD + 2
    assert [failed.error_of(n + 10) for n in range(HELD + 2)] == errors
