"""Clients' name patterns: RE2 (linear time), a length bound, refusals that name the problem."""
from __future__ import annotations

import pytest

from gateway.management.name_patterns import MAX_PATTERN_LENGTH, PatternRefused, compile_name_pattern


def test_a_pattern_searches_names_as_python_re_would():
    pattern = compile_name_pattern(r"^orders\.(eu|us)-\d+$")
    assert pattern.search("orders.eu-12")
    assert not pattern.search("orders.asia-1")
    assert compile_name_pattern("x").search("a-x-b")  # search, not a whole-name match


def test_the_catastrophic_pattern_of_issue_41_is_taken_and_answers_no_match():
    # under a backtracking engine this is 2**60 steps; RE2 answers in one pass
    assert compile_name_pattern("(.|.)*X").search("a" * 60) is None


@pytest.mark.parametrize("text,words", [
    (r"(a)\1", "invalid escape sequence"),
    ("(?=a)b", "invalid perl operator"),
    ("(", "missing )"),
    ("a{1001}", "invalid repetition size"),
])
def test_what_re2_refuses_is_refused_with_its_reason(text, words):
    with pytest.raises(PatternRefused) as info:
        compile_name_pattern(text)
    assert words in str(info.value)
    assert "RE2 syntax" in str(info.value)


def test_a_pattern_longer_than_the_bound_is_refused():
    compile_name_pattern("a" * MAX_PATTERN_LENGTH)
    with pytest.raises(PatternRefused, match=f"at most {MAX_PATTERN_LENGTH}"):
        compile_name_pattern("a" * (MAX_PATTERN_LENGTH + 1))
