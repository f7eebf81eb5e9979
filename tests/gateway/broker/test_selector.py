"""JMS selectors: SQL-92 edge cases, parse errors, and Hypothesis checks of the parser
and evaluator against a small reference evaluator over generated expressions and
messages."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from gateway.broker.selector import SelectorError, compile_selector

MESSAGE = {"n": 5, "f": 2.5, "s": "abc", "u": "a_c%", "t": True, "z": 0}


def ev(text: str, props: dict = MESSAGE):
    return compile_selector(text).evaluate(props.get)


@pytest.mark.parametrize("text, result", [
    ("n = 5", True), ("n <> 5", False), ("n = 5.0", True), ("f > n", False),
    ("missing = 1", None), ("NOT missing = 1", None), ("missing IS NULL", True),
    ("n IS NOT NULL", True), ("missing = 1 AND n = 6", False), ("missing = 1 OR n = 5", True),
    ("missing = 1 OR n = 6", None), ("missing = 1 AND n = 5", None),
    ("s = 'abc'", True), ("s = 1", None), ("s < 'b'", None), ("t = TRUE", True), ("t", True),
    ("t = 1", None), ("n", None),
    ("n BETWEEN 5 AND 6", True), ("n BETWEEN 6 AND 7", False), ("n NOT BETWEEN 6 AND 7", True),
    ("missing BETWEEN 1 AND 2", None), ("missing NOT BETWEEN 1 AND 2", None),
    ("s IN ('x', 'abc')", True), ("s NOT IN ('x', 'abc')", False), ("missing IN ('a')", None),
    ("s LIKE 'a%'", True), ("s LIKE '_b_'", True), ("s LIKE 'b%'", False), ("s NOT LIKE 'b%'", True),
    ("u LIKE 'a\\_c\\%' ESCAPE '\\'", True), ("s LIKE 'a\\_c' ESCAPE '\\'", False),
    ("n LIKE '5'", None), ("missing LIKE 'a'", None),
    ("n + 1 = 6", True), ("n * f = 12.5", True), ("n / 2 = 2", True), ("-n / 2 = -2", True),
    ("n / 2.0 = 2.5", True), ("n / z = 1", None), ("n + missing = 1", None), ("s + 1 = 1", None),
    ("-(n) = -5", True), ("+n = 5", True), ("2 * (n + 1) = 12", True), ("n - 2 - 1 = 2", True),
    ("0x10 = 16", True), ("10L = 10", True), ("1e1 = 10", True), (".5 = 0.5", True), ("2F = 2", True),
    ("s = 'it''s'", False), ("not (n = 5)", False), ("n = 5 and s = 'abc' or false", True),
])
def test_sql92_edge_cases(text, result):
    assert ev(text) is result


def test_quote_in_literal():
    assert ev("q = 'it''s'", {"q": "it's"}) is True


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("n =", "expected a value"), ("n = = 1", "expected a value"),
    ("(n = 1", "expected ')'"), ("n LIKE 1", "string literal"),
    ("n LIKE 'x' ESCAPE ''", "one character"), ("n LIKE 'x\\' ESCAPE '\\'", "ends with its escape"),
    ("NULL = n", "IS [NOT] NULL"), ("n NOT 5", "after NOT"), ("n # 1", "unexpected character"),
    ("n IN ()", "literal"), ("n = 1 n = 2", "unexpected token"), ("'unterminated", "unexpected"),
])
def test_parse_errors_name_the_problem(text, words):
    with pytest.raises(SelectorError) as info:
        compile_selector(text)
    assert words in str(info.value)


def test_names_read_by_the_expression():
    assert compile_selector("a = 1 AND JMSType LIKE 'x%' OR c IS NULL").names == {"a", "JMSType", "c"}


# ------------------------------------------------------------ Hypothesis: reference evaluator

NAMES = ["a", "b", "c", "s"]
values = st.one_of(st.none(), st.integers(-5, 5), st.sampled_from([0.5, -1.5, 2.0]),
                   st.sampled_from(["x", "y", "x_y", "%"]), st.booleans())
messages = st.fixed_dictionaries({}, optional={name: values for name in NAMES})


def _literal(value) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


arith = st.deferred(lambda: st.one_of(
    st.sampled_from(NAMES).map(lambda n: ("name", n)),
    st.integers(0, 5).map(lambda v: ("lit", v)),
    st.sampled_from([0.5, 2.0]).map(lambda v: ("lit", v)),
    st.sampled_from(["x", "x_y"]).map(lambda v: ("lit", v)),
    st.tuples(st.sampled_from(["+", "-", "*", "/"]), arith, arith).map(lambda t: ("arith",) + t),
    arith.map(lambda a: ("neg", a)),
))
cond = st.deferred(lambda: st.one_of(
    st.tuples(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), arith, arith).map(lambda t: ("cmp",) + t),
    st.tuples(arith, st.booleans()).map(lambda t: ("isnull",) + t),
    st.tuples(arith, arith, arith, st.booleans()).map(lambda t: ("between",) + t),
    st.tuples(arith, st.lists(st.sampled_from(["x", "y", "x_y"]), min_size=1, max_size=3),
              st.booleans()).map(lambda t: ("in",) + t),
    st.tuples(arith, st.sampled_from(["x%", "_", "x!_y", "%y", "!%"]), st.booleans()).map(
        lambda t: ("like",) + t),
    st.sampled_from(NAMES).map(lambda n: ("bool", n)),
    st.tuples(st.sampled_from(["AND", "OR"]), cond, cond).map(lambda t: ("logic",) + t),
    cond.map(lambda c: ("not", c)),
))


def render(node) -> str:
    kind = node[0]
    if kind == "name":
        return node[1]
    if kind == "lit":
        return _literal(node[1])
    if kind == "arith":
        return f"({render(node[2])} {node[1]} {render(node[3])})"
    if kind == "neg":
        return f"-({render(node[1])})"
    if kind == "cmp":
        return f"({render(node[2])} {node[1]} {render(node[3])})"
    if kind == "isnull":
        return f"({render(node[1])} IS {'NOT ' if node[2] else ''}NULL)"
    if kind == "between":
        return f"({render(node[1])} {'NOT ' if node[4] else ''}BETWEEN {render(node[2])} AND {render(node[3])})"
    if kind == "in":
        items = ", ".join(_literal(v) for v in node[2])
        return f"({render(node[1])} {'NOT ' if node[3] else ''}IN ({items}))"
    if kind == "like":
        return f"({render(node[1])} {'NOT ' if node[3] else ''}LIKE {_literal(node[2])} ESCAPE '!')"
    if kind == "bool":
        return node[1]
    if kind == "logic":
        return f"({render(node[2])} {node[1]} {render(node[3])})"
    return f"(NOT {render(node[1])})"


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def ref(node, msg):
    """The reference: JMS semantics written as plainly as possible (None: NULL/UNKNOWN)."""
    kind = node[0]
    if kind == "name":
        return msg.get(node[1])
    if kind == "lit":
        return node[1]
    if kind == "arith":
        a, b = ref(node[2], msg), ref(node[3], msg)
        if not (_num(a) and _num(b)):
            return None
        op = node[1]
        if op == "/":
            if b == 0:
                return None
            if isinstance(a, int) and isinstance(b, int):
                return int(a / b) if abs(a) < 2 ** 52 else None
            return a / b
        return {"+": a + b, "-": a - b, "*": a * b}[op]
    if kind == "neg":
        v = ref(node[1], msg)
        return -v if _num(v) else None
    if kind == "cmp":
        return cmp(node[1], ref(node[2], msg), ref(node[3], msg))
    if kind == "isnull":
        return (ref(node[1], msg) is None) != node[2]
    if kind == "between":
        v = ref(node[1], msg)
        r = and3(cmp(">=", v, ref(node[2], msg)), cmp("<=", v, ref(node[3], msg)))
        return not3(r) if node[4] else r
    if kind == "in":
        v = ref(node[1], msg)
        r = None if not isinstance(v, str) and v is None else (
            None if not isinstance(v, str) else v in node[2])
        return not3(r) if node[3] else r
    if kind == "like":
        v = ref(node[1], msg)
        r = None if not isinstance(v, str) else like(v, node[2])
        return not3(r) if node[3] else r
    if kind == "bool":
        v = msg.get(node[1])
        return v if isinstance(v, bool) else None
    if kind == "logic":
        a, b = ref(node[2], msg), ref(node[3], msg)
        a = a if isinstance(a, bool) else None
        b = b if isinstance(b, bool) else None
        return and3(a, b) if node[1] == "AND" else or3(a, b)
    v = ref(node[1], msg)
    return not3(v if isinstance(v, bool) else None)


def cmp(op, a, b):
    if a is None or b is None:
        return None
    if _num(a) and _num(b):
        return {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
    if type(a) is type(b) and isinstance(a, (str, bool)) and op in ("=", "<>"):
        return (a == b) if op == "=" else (a != b)
    return None


def and3(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def or3(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def not3(a):
    return None if a is None else not a


def like(value: str, pattern: str) -> bool:
    """LIKE by dynamic programming over the pattern (escape '!'), not by regex."""
    tokens = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "!":
            tokens.append(("lit", pattern[i + 1]))
            i += 2
        else:
            c = pattern[i]
            tokens.append(("any",) if c == "%" else ("one",) if c == "_" else ("lit", c))
            i += 1
    ok = [True] + [False] * len(value)
    for tok in tokens:
        new = [False] * (len(value) + 1)
        for j in range(len(value) + 1):
            if tok[0] == "any":
                new[j] = ok[j] or (j > 0 and new[j - 1])
            elif j > 0 and ok[j - 1] and (tok[0] == "one" or value[j - 1] == tok[1]):
                new[j] = True
        ok = new
    return ok[len(value)]


@given(cond, messages)
def test_compiled_selector_agrees_with_the_reference(node, msg):
    text = render(node)
    expected = ref(node, msg)
    got = compile_selector(text).evaluate(msg.get)
    assert got is (expected if isinstance(expected, bool) else None), text


@given(cond)
def test_rendered_expressions_parse_and_keywords_are_case_insensitive(node):
    text = render(node)
    lowered = (text.replace("AND", "and").replace("NOT", "not").replace("BETWEEN", "between")
               .replace("LIKE", "Like").replace("IS", "is").replace("NULL", "null"))
    msg = {"a": 1, "b": "x", "c": True}
    assert compile_selector(text).evaluate(msg.get) is compile_selector(lowered).evaluate(msg.get)


@given(st.text(max_size=30))
def test_any_text_parses_or_raises_selector_error(text):
    try:
        compile_selector(text)
    except SelectorError:
        pass
