"""Druid's native expression language parsed to a small AST (literals, identifiers, operators, calls)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from radstack.sql_text import ExpressionError


@dataclass(frozen=True)
class Literal:
    value: int | float | str | None
    type: str | None  # "LONG" | "DOUBLE" | "STRING" | None (null)


@dataclass(frozen=True)
class Identifier:
    name: str


@dataclass(frozen=True)
class Unary:
    op: str  # "-" | "!"
    arg: Expr


@dataclass(frozen=True)
class Binary:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Call:
    name: str  # lower-cased
    args: tuple[Expr, ...]


Expr = Literal | Identifier | Unary | Binary | Call

# ---- tokenizer + parser ----------------------------------------------------------------------------

_TOKEN_RX = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<double>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<long>\d+)
  | (?P<string>'(?:[^'\\]|\\.)*')
  | (?P<qident>"(?:[^"\\]|\\.)*")
  | (?P<ident>[_$a-zA-Z][_$a-zA-Z0-9]*)
  | (?P<op><=|>=|==|!=|&&|\|\||[-+*/%^<>!(),\[\]])
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}


def _unescape(body: str) -> str:
    def repl(m: re.Match[str]) -> str:
        s = m.group(1)
        if s.startswith("u"):
            return chr(int(s[1:], 16))
        return _ESCAPES.get(s, s)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", repl, body, flags=re.DOTALL)


def _tokenize(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RX.match(text, pos)
        if not m:
            raise ExpressionError(f"cannot parse expression {text!r}: unexpected {text[pos : pos + 10]!r}")
        kind = m.lastgroup or ""
        if kind != "ws":
            out.append((kind, m.group()))
        pos = m.end()
    out.append(("eof", ""))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i]

    def take(self) -> tuple[str, str]:
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, *ops: str) -> str | None:
        kind, val = self.peek()
        if kind == "op" and val in ops:
            self.i += 1
            return val
        return None

    def expect(self, op: str) -> None:
        if not self.accept(op):
            raise ExpressionError(
                f"cannot parse expression {self.text!r}: expected {op!r} but found {self.peek()[1]!r}"
            )

    def parse(self) -> Expr:
        e = self.or_()
        if self.peek()[0] != "eof":
            raise ExpressionError(f"cannot parse expression {self.text!r}: unexpected {self.peek()[1]!r}")
        return e

    def or_(self) -> Expr:
        e = self.and_()
        while self.accept("||"):
            e = Binary("||", e, self.and_())
        return e

    def and_(self) -> Expr:
        e = self.cmp()
        while self.accept("&&"):
            e = Binary("&&", e, self.cmp())
        return e

    def cmp(self) -> Expr:
        e = self.add()
        while op := self.accept("<", "<=", ">", ">=", "==", "!="):
            e = Binary(op, e, self.add())
        return e

    def add(self) -> Expr:
        e = self.mul()
        while op := self.accept("+", "-"):
            e = Binary(op, e, self.mul())
        return e

    def mul(self) -> Expr:
        e = self.pow()
        while op := self.accept("*", "/", "%"):
            e = Binary(op, e, self.pow())
        return e

    def pow(self) -> Expr:
        base = self.unary()
        if self.accept("^"):
            return Binary("^", base, self.pow())  # right-associative
        return base

    def unary(self) -> Expr:
        # Druid's grammar binds unary minus/not tighter than '^': -2^2 == (-2)^2.
        if op := self.accept("-", "!"):
            arg = self.unary()
            if op == "-" and isinstance(arg, Literal) and arg.type in ("LONG", "DOUBLE"):
                assert isinstance(arg.value, int | float)
                return Literal(-arg.value, arg.type)
            return Unary(op, arg)
        return self.primary()

    def primary(self) -> Expr:
        kind, val = self.take()
        if kind == "long":
            return Literal(int(val), "LONG")
        if kind == "double":
            return Literal(float(val), "DOUBLE")
        if kind == "string":
            return Literal(_unescape(val[1:-1]), "STRING")
        if kind == "qident":
            return Identifier(_unescape(val[1:-1]))
        if kind == "ident":
            if val == "null":
                return Literal(None, None)
            if val in ("NaN", "Infinity"):
                return Literal(float(val.lower().replace("infinity", "inf")), "DOUBLE")
            if self.accept("("):
                args: list[Expr] = []
                if not self.accept(")"):
                    args.append(self.or_())
                    while self.accept(","):
                        args.append(self.or_())
                    self.expect(")")
                return Call(val.lower(), tuple(args))
            return Identifier(val)
        if kind == "op" and val == "(":
            e = self.or_()
            self.expect(")")
            return e
        if kind == "op" and val == "[":
            raise ExpressionError(f"array literals are not supported (in {self.text!r})")
        raise ExpressionError(f"cannot parse expression {self.text!r}: unexpected {val or 'end of input'!r}")


def parse_expression(text: str) -> Expr:
    """Parse a Druid expression into an AST (raises :class:`ExpressionError`)."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("expression is empty")
    return _Parser(text).parse()


def identifier_uses(node: Expr) -> Iterator[tuple[Identifier, Call | None]]:
    """Every identifier of ``node`` in reading order, with the call it is a direct argument of (None
    when it is not one)."""
    stack: list[tuple[Expr, Call | None]] = [(node, None)]
    while stack:
        n, parent = stack.pop()
        if isinstance(n, Identifier):
            yield n, parent
        elif isinstance(n, Unary):
            stack.append((n.arg, None))
        elif isinstance(n, Binary):
            stack += [(n.right, None), (n.left, None)]
        elif isinstance(n, Call):
            stack += [(a, n) for a in reversed(n.args)]


def required_columns(expr: str | Expr) -> set[str]:
    """The column names an expression reads."""
    node = parse_expression(expr) if isinstance(expr, str) else expr
    return {ident.name for ident, _ in identifier_uses(node)}
