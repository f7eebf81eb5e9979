"""JMS message selectors (SQL-92 conditional expressions, JMS 2.0 §3.8.1), parsed once and
compiled into a Python callable.

``compile_selector(text)`` returns a :class:`Selector` whose ``matches(lookup)`` is True
only when the expression is TRUE for the message that ``lookup(name)`` describes (a
name's value, or None when the message has no such property). It is sans-I/O and knows
nothing about messages: ``message_view`` maps the JMS header names and the properties to
values. Raises :class:`SelectorError` naming the problem and its position.

Semantics (JMS, as ActiveMQ and Qpid Broker-J evaluate them):

* three-valued logic: a missing property is NULL; a comparison or arithmetic with NULL is
  UNKNOWN (None); ``NOT UNKNOWN`` is UNKNOWN; ``FALSE AND UNKNOWN`` is FALSE, ``TRUE OR
  UNKNOWN`` is TRUE; a message is selected only when the result is TRUE;
* comparing values of different kinds (a string with a number, a boolean with anything
  but a boolean) is UNKNOWN; booleans and strings compare only with ``=`` and ``<>``;
* numbers: exact (int) and approximate (float); an operation with a float is a float;
  integer division truncates towards zero (Java ``long``); division by zero is UNKNOWN;
* ``x [NOT] BETWEEN a AND b`` is ``a <= x AND x <= b`` (NOT: its negation);
* ``x [NOT] IN ('a', ...)``: NULL ``x`` is UNKNOWN;
* ``x [NOT] LIKE 'pat' [ESCAPE 'c']``: ``_`` one character, ``%`` any run; ``c`` before
  either makes it literal; a non-string ``x`` is UNKNOWN;
* ``x IS [NOT] NULL`` is never UNKNOWN;
* keywords are case-insensitive, identifiers case-sensitive; string literals are in
  single quotes, ``''`` for a quote; numbers as Java writes them (``10``, ``10L``,
  ``0x1F``, ``1.5``, ``.5``, ``1e3``, ``2.0F``).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Optional

__all__ = ["SelectorError", "Selector", "compile_selector"]

Lookup = Callable[[str], Any]
_Eval = Callable[[Lookup], Any]

_KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "LIKE", "IN", "IS", "NULL", "ESCAPE",
                       "TRUE", "FALSE"})

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<hex>0[xX][0-9a-fA-F]+[lL]?)
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?|\d+[eE][+-]?\d+[fFdD]?|\d+[fFdD])
  | (?P<int>\d+[lL]?)
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|<=|>=|[=<>+\-*/(),])
""", re.VERBOSE)


class SelectorError(ValueError):
    """A selector that does not parse; the text names the problem and where."""


class Selector:
    """A compiled selector: :meth:`matches` is what a link's dispatch calls."""

    __slots__ = ("text", "_evaluate", "names")

    def __init__(self, text: str, evaluate: _Eval, names: frozenset) -> None:
        self.text = text
        self._evaluate = evaluate
        #: the identifiers the expression reads (so a view decodes only what is needed)
        self.names = names

    def evaluate(self, lookup: Lookup) -> Optional[bool]:
        """TRUE, FALSE or UNKNOWN (None) for the message ``lookup`` describes."""
        value = self._evaluate(lookup)
        return value if value is None or isinstance(value, bool) else None

    def matches(self, lookup: Lookup) -> bool:
        return self._evaluate(lookup) is True

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


def compile_selector(text: str) -> Selector:
    """Parse ``text`` once into a :class:`Selector`. Raises :class:`SelectorError`."""
    parser = _Parser(text)
    evaluate = parser.parse()
    return Selector(text, evaluate, frozenset(parser.names))


# --------------------------------------------------------------------- tokens

class _Token:
    __slots__ = ("kind", "value", "pos")

    def __init__(self, kind: str, value: Any, pos: int) -> None:
        self.kind, self.value, self.pos = kind, value, pos


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    pos, end = 0, len(text)
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SelectorError(f"unexpected character {text[pos]!r} at position {pos}")
        kind, raw = m.lastgroup, m.group()
        if kind == "string":
            out.append(_Token("literal", raw[1:-1].replace("''", "'"), pos))
        elif kind == "hex":
            out.append(_Token("literal", int(raw.rstrip("lL"), 16), pos))
        elif kind == "int":
            out.append(_Token("literal", int(raw.rstrip("lL")), pos))
        elif kind == "float":
            out.append(_Token("literal", float(raw.rstrip("fFdD")), pos))
        elif kind == "ident":
            upper = raw.upper()
            if upper in ("TRUE", "FALSE"):
                out.append(_Token("literal", upper == "TRUE", pos))
            elif upper in _KEYWORDS:
                out.append(_Token("kw", upper, pos))
            else:
                out.append(_Token("ident", raw, pos))
        elif kind == "op":
            out.append(_Token("op", raw, pos))
        pos = m.end()
    out.append(_Token("end", None, end))
    return out


# --------------------------------------------------------------------- values

def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _compare(op: str, a: Any, b: Any) -> Optional[bool]:
    if a is None or b is None:
        return None
    if _number(a) and _number(b):
        pass
    elif not ((isinstance(a, str) and isinstance(b, str))
              or (isinstance(a, bool) and isinstance(b, bool))):
        return None  # different kinds, or values a selector cannot compare
    elif op not in ("=", "<>"):
        return None  # strings and booleans: equality only
    if op == "=":
        return a == b
    if op == "<>":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def _arith(op: str, a: Any, b: Any) -> Any:
    if not (_number(a) and _number(b)):
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _not(v: Any) -> Optional[bool]:
    return None if not isinstance(v, bool) else not v


def _truth(v: Any) -> Optional[bool]:
    return v if isinstance(v, bool) else None


def like_pattern(pattern: str, escape: Optional[str]) -> "re.Pattern[str]":
    """The regular expression of a LIKE pattern (``_``, ``%``, ``escape``)."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if escape is not None and c == escape:
            if i + 1 >= n:
                raise SelectorError(f"LIKE pattern {pattern!r} ends with its escape character")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)


# --------------------------------------------------------------------- parser

class _Parser:
    """Recursive descent over JMS's grammar, lowest precedence first: OR, AND, NOT,
    comparison (= <> < <= > >= BETWEEN LIKE IN IS), + -, * /, unary + -."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.names: set[str] = set()

    # -- token helpers
    @property
    def tok(self) -> _Token:
        return self.toks[self.i]

    def _fail(self, what: str) -> SelectorError:
        tok = self.tok
        found = "the end" if tok.kind == "end" else repr(self.text[tok.pos:tok.pos + 12])
        return SelectorError(f"{what} at position {tok.pos} (found {found}) in selector "
                             f"{self.text!r}")

    def _kw(self, word: str) -> bool:
        if self.tok.kind == "kw" and self.tok.value == word:
            self.i += 1
            return True
        return False

    def _op(self, op: str) -> bool:
        if self.tok.kind == "op" and self.tok.value == op:
            self.i += 1
            return True
        return False

    def _expect_kw(self, word: str) -> None:
        if not self._kw(word):
            raise self._fail(f"expected {word}")

    def _expect_op(self, op: str) -> None:
        if not self._op(op):
            raise self._fail(f"expected '{op}'")

    def _string_literal(self, what: str) -> str:
        tok = self.tok
        if tok.kind != "literal" or not isinstance(tok.value, str):
            raise self._fail(f"expected a string literal for {what}")
        self.i += 1
        return tok.value

    # -- grammar
    def parse(self) -> _Eval:
        if self.tok.kind == "end":
            raise SelectorError("empty selector")
        expr = self._or()
        if self.tok.kind != "end":
            raise self._fail("unexpected token")
        return expr

    def _or(self) -> _Eval:
        left = self._and()
        while self._kw("OR"):
            right = self._and()
            left = (lambda a, b: lambda get: _or3(a(get), b, get))(left, right)
        return left

    def _and(self) -> _Eval:
        left = self._not()
        while self._kw("AND"):
            right = self._not()
            left = (lambda a, b: lambda get: _and3(a(get), b, get))(left, right)
        return left

    def _not(self) -> _Eval:
        if self._kw("NOT"):
            inner = self._not()
            return lambda get: _not(inner(get))
        return self._comparison()

    def _comparison(self) -> _Eval:
        left = self._additive()
        tok = self.tok
        if tok.kind == "op" and tok.value in ("=", "<>", "<", "<=", ">", ">="):
            self.i += 1
            op = tok.value
            right = self._additive()
            return lambda get: _compare(op, left(get), right(get))
        if self._kw("IS"):
            negate = self._kw("NOT")
            self._expect_kw("NULL")
            if negate:
                return lambda get: left(get) is not None
            return lambda get: left(get) is None
        negate = self._kw("NOT")
        if self._kw("BETWEEN"):
            low = self._additive()
            self._expect_kw("AND")
            high = self._additive()

            def between(get: Lookup) -> Optional[bool]:
                v = left(get)
                return _and3(_compare(">=", v, low(get)), lambda g: _compare("<=", v, high(g)), get)
            return (lambda get: _not(between(get))) if negate else between
        if self._kw("IN"):
            self._expect_op("(")
            values = [self._literal_for("IN")]
            while self._op(","):
                values.append(self._literal_for("IN"))
            self._expect_op(")")

            def inside(get: Lookup) -> Optional[bool]:
                v = left(get)
                if v is None:
                    return None
                unknown = False
                for candidate in values:
                    r = _compare("=", v, candidate)
                    if r is True:
                        return True
                    unknown = unknown or r is None
                return None if unknown else False
            return (lambda get: _not(inside(get))) if negate else inside
        if self._kw("LIKE"):
            pattern = self._string_literal("LIKE")
            escape = None
            if self._kw("ESCAPE"):
                escape = self._string_literal("ESCAPE")
                if len(escape) != 1:
                    raise SelectorError(f"ESCAPE must be one character, not {escape!r}")
            regex = like_pattern(pattern, escape)

            def like(get: Lookup) -> Optional[bool]:
                v = left(get)
                if not isinstance(v, str):
                    return None
                return regex.fullmatch(v) is not None
            return (lambda get: _not(like(get))) if negate else like
        if negate:
            raise self._fail("expected BETWEEN, IN or LIKE after NOT")
        return left

    def _literal_for(self, what: str) -> Any:
        tok = self.tok
        sign = 1
        if tok.kind == "op" and tok.value in "+-":
            sign = -1 if tok.value == "-" else 1
            self.i += 1
            tok = self.tok
            if tok.kind != "literal" or not _number(tok.value):
                raise self._fail(f"expected a number in {what}")
        if tok.kind != "literal":
            raise self._fail(f"expected a literal in {what}")
        self.i += 1
        return tok.value * sign if _number(tok.value) else tok.value

    def _additive(self) -> _Eval:
        left = self._multiplicative()
        while self.tok.kind == "op" and self.tok.value in ("+", "-"):
            op = self.tok.value
            self.i += 1
            right = self._multiplicative()
            left = (lambda a, b, o: lambda get: _arith(o, a(get), b(get)))(left, right, op)
        return left

    def _multiplicative(self) -> _Eval:
        left = self._unary()
        while self.tok.kind == "op" and self.tok.value in ("*", "/"):
            op = self.tok.value
            self.i += 1
            right = self._unary()
            left = (lambda a, b, o: lambda get: _arith(o, a(get), b(get)))(left, right, op)
        return left

    def _unary(self) -> _Eval:
        if self._op("-"):
            inner = self._unary()

            def negative(get: Lookup) -> Any:
                v = inner(get)
                return -v if _number(v) else None
            return negative
        if self._op("+"):
            inner = self._unary()

            def positive(get: Lookup) -> Any:
                v = inner(get)
                return v if _number(v) else None
            return positive
        return self._primary()

    def _primary(self) -> _Eval:
        tok = self.tok
        if self._op("("):
            inner = self._or()
            self._expect_op(")")
            return inner
        if tok.kind == "literal":
            self.i += 1
            value = tok.value
            return lambda get: value
        if tok.kind == "ident":
            self.i += 1
            name = tok.value
            self.names.add(name)
            return lambda get: get(name)
        if tok.kind == "kw" and tok.value == "NULL":
            raise self._fail("NULL is only allowed in IS [NOT] NULL")
        raise self._fail("expected a value")


def _and3(a: Any, right: _Eval, get: Lookup) -> Optional[bool]:
    """SQL AND: the right side is evaluated only when it can change the answer."""
    a = _truth(a)
    if a is False:
        return False
    b = _truth(right(get))
    if b is False:
        return False
    return None if a is None or b is None else True


def _or3(a: Any, right: _Eval, get: Lookup) -> Optional[bool]:
    a = _truth(a)
    if a is True:
        return True
    b = _truth(right(get))
    if b is True:
        return True
    return None if a is None or b is None else False
