"""A small evaluator for the subset of CEL (Common Expression Language) that the webhook's
matchConditions use, so they can be exercised on sample pods without an API server.

Supported: string literals, true/false/null, identifiers, field selection, indexing, `!`, `&&`,
`||`, `==`, `!=`, `in`, parentheses, and the macros `has(x.f)` and `list.exists(v, pred)`.
Anything else is a syntax error: an expression that leaves the subset fails the test rather than
being half-understood. Semantics follow the CEL spec where it matters here: `&&`/`||` absorb an
error when the other side decides the result; selecting a missing map key is an error; `has()`
tests presence; `in` on a map tests its keys.
"""

import re


class CelSyntaxError(Exception):
    pass


class CelEvalError(Exception):
    pass


_TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<op>\|\||&&|==|!=|[!().,\[\]])
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
)""", re.X)


def tokenize(text):
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise CelSyntaxError("unexpected character at %d: %r" % (pos, text[pos:pos + 20]))
        pos = m.end()
        if m.group("str") is not None:
            s = m.group("str")
            out.append(("str", s[1:-1].replace("\\'", "'").replace('\\"', '"')))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        else:
            out.append(("ident", m.group("ident")))
    return out


class Parser:
    def __init__(self, text):
        self.toks = tokenize(text)
        self.i = 0

    def peek(self, kind=None, value=None):
        if self.i >= len(self.toks):
            return None
        t = self.toks[self.i]
        if (kind and t[0] != kind) or (value and t[1] != value):
            return None
        return t

    def take(self, kind=None, value=None):
        t = self.peek(kind, value)
        if t is None:
            got = self.toks[self.i] if self.i < len(self.toks) else ("end", "")
            raise CelSyntaxError("expected %s, got %r" % (value or kind, got[1]))
        self.i += 1
        return t

    def parse(self):
        e = self.or_()
        if self.i != len(self.toks):
            raise CelSyntaxError("unexpected %r after the expression" % (self.toks[self.i][1],))
        return e

    def or_(self):
        e = self.and_()
        while self.peek("op", "||"):
            self.take()
            e = ("or", e, self.and_())
        return e

    def and_(self):
        e = self.rel()
        while self.peek("op", "&&"):
            self.take()
            e = ("and", e, self.rel())
        return e

    def rel(self):
        e = self.unary()
        for op in ("==", "!="):
            if self.peek("op", op):
                self.take()
                return (op, e, self.unary())
        if self.peek("ident", "in"):
            self.take()
            return ("in", e, self.unary())
        return e

    def unary(self):
        if self.peek("op", "!"):
            self.take()
            return ("not", self.unary())
        return self.member()

    def member(self):
        e = self.primary()
        while True:
            if self.peek("op", "."):
                self.take()
                name = self.take("ident")[1]
                if self.peek("op", "("):
                    if name != "exists":
                        raise CelSyntaxError("method %s() is outside the supported subset" % name)
                    self.take()
                    var = self.take("ident")[1]
                    self.take("op", ",")
                    pred = self.or_()
                    self.take("op", ")")
                    e = ("exists", e, var, pred)
                else:
                    e = ("select", e, name)
            elif self.peek("op", "["):
                self.take()
                idx = self.or_()
                self.take("op", "]")
                e = ("index", e, idx)
            else:
                return e

    def primary(self):
        if self.peek("str"):
            return ("lit", self.take()[1])
        if self.peek("op", "("):
            self.take()
            e = self.or_()
            self.take("op", ")")
            return e
        name = self.take("ident")[1]
        if name in ("true", "false"):
            return ("lit", name == "true")
        if name == "null":
            return ("lit", None)
        if name == "in":
            raise CelSyntaxError("'in' without a left operand")
        if self.peek("op", "("):
            if name != "has":
                raise CelSyntaxError("function %s() is outside the supported subset" % name)
            self.take()
            arg = self.member()
            self.take("op", ")")
            if arg[0] != "select":
                raise CelSyntaxError("has() takes a field selection, like has(a.b)")
            return ("has", arg)
        return ("var", name)


def parse(text):
    return Parser(text).parse()


def _bool(v):
    if not isinstance(v, bool):
        raise CelEvalError("no such overload: expected bool, got %s" % type(v).__name__)
    return v


def evaluate(node, env):
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "var":
        if node[1] not in env:
            raise CelEvalError("undeclared reference to %r" % node[1])
        return env[node[1]]
    if kind == "select":
        base = evaluate(node[1], env)
        if not isinstance(base, dict):
            raise CelEvalError("field selection .%s on %s" % (node[2], type(base).__name__))
        if node[2] not in base:
            raise CelEvalError("no such key: %s" % node[2])
        return base[node[2]]
    if kind == "index":
        base, idx = evaluate(node[1], env), evaluate(node[2], env)
        if isinstance(base, dict):
            if idx not in base:
                raise CelEvalError("no such key: %s" % idx)
            return base[idx]
        if isinstance(base, list) and isinstance(idx, int):
            return base[idx]
        raise CelEvalError("cannot index %s" % type(base).__name__)
    if kind == "has":
        base = evaluate(node[1][1], env)
        if not isinstance(base, dict):
            raise CelEvalError("has() on %s" % type(base).__name__)
        return node[1][2] in base
    if kind == "not":
        return not _bool(evaluate(node[1], env))
    if kind in ("and", "or"):
        results = []
        for side in node[1:]:
            try:
                results.append(_bool(evaluate(side, env)))
            except CelEvalError as e:
                results.append(e)
        decisive = kind == "or"  # true decides ||, false decides &&
        if any(r is decisive for r in results):
            return decisive
        for r in results:
            if isinstance(r, CelEvalError):
                raise r
        return not decisive
    if kind in ("==", "!="):
        a, b = evaluate(node[1], env), evaluate(node[2], env)
        return (a == b) if kind == "==" else (a != b)
    if kind == "in":
        a, b = evaluate(node[1], env), evaluate(node[2], env)
        if isinstance(b, (dict, list)):
            return a in b
        raise CelEvalError("'in' on %s" % type(b).__name__)
    if kind == "exists":
        seq = evaluate(node[1], env)
        if not isinstance(seq, list):
            raise CelEvalError("exists() on %s" % type(seq).__name__)
        results = []
        for item in seq:
            try:
                results.append(_bool(evaluate(node[3], dict(env, **{node[2]: item}))))
            except CelEvalError as e:
                results.append(e)
        if any(r is True for r in results):
            return True
        for r in results:
            if isinstance(r, CelEvalError):
                raise r
        return False
    raise CelEvalError("unknown node %s" % kind)


def references(node, out=None):
    """Every dotted path (a.b.c) and string literal in the expression."""
    out = out if out is not None else set()

    def path(n):
        if n[0] == "var":
            return n[1]
        if n[0] == "select":
            p = path(n[1])
            return p + "." + n[2] if p else None
        return None

    if node[0] == "select":
        p = path(node)
        if p:
            out.add(p)
    if node[0] == "lit" and isinstance(node[1], str):
        out.add("'%s'" % node[1])
    for child in node[1:]:
        if isinstance(child, tuple):
            references(child, out)
    return out
