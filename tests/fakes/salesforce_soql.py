"""The SOQL the fake Salesforce understands, parsed and run as Salesforce would, refusing
what Salesforce refuses.

    SELECT field, Relationship.field, (SELECT field, ... FROM ChildRelationship
            [ORDER BY ...] [LIMIT n]), ... | COUNT()
    FROM Object
    [WHERE condition]          comparisons (=, !=, <>, LIKE) of a field with a literal,
                               joined by AND or OR (never both at one level without
                               parentheses, as in Salesforce), NOT, parentheses
    [ORDER BY field [ASC|DESC], ...]
    [LIMIT n]

String literals take Salesforce's escapes (\\n \\r \\t \\b \\f \\" \\' \\\\ \\uXXXX, and \\% \\_
inside LIKE only); any other backslash, an unterminated string or a stray token is
MALFORMED_QUERY. An unknown object is INVALID_TYPE, an unknown field INVALID_FIELD, a
filter on a long text area INVALID_FIELD, a malformed id INVALID_QUERY_FILTER_OPERATOR.
Comparisons of text are case-insensitive, as in Salesforce.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: the fields of each object: name -> kind ("id", "text", "longtext", "date", or
#: "ref:Object:Relationship" for a lookup)
SCHEMA: dict[str, dict[str, str]] = {
    "Contact": {
        "Id": "id",
        "Name": "text",
        "FirstName": "text",
        "LastName": "text",
        "Email": "text",
        "Phone": "text",
        "Title": "text",
        "AccountId": "ref:Account:Account",
        "CreatedDate": "date",
    },
    "Account": {
        "Id": "id",
        "Name": "text",
        "Industry": "text",
        "Type": "text",
        "Website": "text",
        "Phone": "text",
        "Description": "longtext",
        "OwnerId": "ref:User:Owner",
        "BillingCity": "text",
        "BillingCountry": "text",
        "CreatedDate": "date",
    },
    "Task": {
        "Id": "id",
        "WhoId": "ref:Contact:Who",
        "Subject": "text",
        "Description": "longtext",
        "Status": "text",
        "ActivityDate": "date",
        "CreatedDate": "date",
    },
    "User": {"Id": "id", "Name": "text", "Email": "text"},
}
#: each object's child relationships: name -> (the child object, its field naming the parent)
CHILDREN: dict[str, dict[str, tuple[str, str]]] = {
    "Account": {"Contacts": ("Contact", "AccountId")},
    "Contact": {"Tasks": ("Task", "WhoId")},
}
ID = re.compile(r"[A-Za-z0-9]{15}(?:[A-Za-z0-9]{3})?")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>')
      | (?P<number>\d+(?:\.\d+)?)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
      | (?P<op>!=|<>|<=|>=|=|<|>)
      | (?P<punct>[(),])
    )""",
    re.VERBOSE,
)
KEYWORDS = {"SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "LIKE", "ORDER", "BY", "ASC", "DESC"}
KEYWORDS |= {"LIMIT", "NULL", "TRUE", "FALSE", "COUNT", "NULLS", "FIRST", "LAST"}


class SoqlError(Exception):
    """A query Salesforce refuses: ``code`` is its errorCode."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Literal:
    value: Any
    #: the text between the quotes, escapes kept (LIKE reads \\% and \\_ from it)
    raw: str | None = None


@dataclass
class Token:
    kind: str  # "string", "number", "name", "op", "punct", "end"
    text: str
    value: Any = None


@dataclass
class Query:
    sobject: str
    fields: list[str]  # empty for COUNT()
    where: Callable[[dict[str, Any]], bool] | None
    order: list[tuple[str, bool]]  # (field, descending)
    limit: int | None
    #: the parent-child subqueries: (relationship, the field naming the parent, the query)
    children: list[tuple[str, str, Query]] = field(default_factory=list)


def tokens(soql: str) -> list[Token]:
    found: list[Token] = []
    at = 0
    while at < len(soql):
        if soql[at:].strip() == "":
            break
        match = _TOKEN.match(soql, at)
        if match is None:
            bad = soql[at:].lstrip()[:20]
            raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{bad}'")
        if match.group("string"):
            text, raw, at = _string(soql, match.end())
            found.append(Token("string", raw, Literal(text, raw)))
            continue
        kind = match.lastgroup or ""
        found.append(Token(kind, match.group(kind)))
        at = match.end()
    found.append(Token("end", ""))
    return found


def _string(soql: str, at: int) -> tuple[str, str, int]:
    """The literal starting after a quote at ``at``: (its value, its raw text, the end)."""
    out, start = [], at
    while at < len(soql):
        char = soql[at]
        if char == "'":
            return "".join(out), soql[start:at], at + 1
        if char == "\\":
            nxt = soql[at + 1 : at + 2]
            if nxt in _ESCAPES or (nxt.lower() in "nrtbf" and nxt):
                out.append(_ESCAPES[nxt.lower()] if nxt.lower() in "nrtbf" else _ESCAPES[nxt])
                at += 2
                continue
            if nxt in ("%", "_"):
                out.append("\\" + nxt)  # only LIKE may use these; checked there
                at += 2
                continue
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", soql[at + 2 : at + 6]):
                out.append(chr(int(soql[at + 2 : at + 6], 16)))
                at += 6
                continue
            raise SoqlError(
                "MALFORMED_QUERY",
                f"Invalid string literal '{soql[start : at + 2]}'. Illegal character sequence "
                f"'\\{nxt}' in string literal.",
            )
        out.append(char)
        at += 1
    raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{soql[start - 1 :][:20]}'")


class Parser:
    """Parses one query against SCHEMA (and so knows its object's fields)."""

    def __init__(self, soql: str) -> None:
        self.tokens = tokens(soql)
        self.at = 0
        self.sobject = ""
        #: a subquery's child relationship
        self.link = ""

    def parse(self, parent: str | None = None) -> Query:
        """The query; ``parent``: the object of the query this one is a subquery of."""
        self.keyword("SELECT")
        fields: list[str] = []
        subqueries: list[int] = []
        if self.peek_keyword("COUNT") and parent is None:
            self.take()
            self.punct("(")
            self.punct(")")
        else:
            while True:
                if self.peek().text == "(" and parent is None:
                    subqueries.append(self.at)
                    self.skip_parentheses()
                else:
                    fields.append(self.name())
                if self.peek().text != ",":
                    break
                self.take()
        self.keyword("FROM")
        self.sobject = self.name()
        if parent is not None:
            child = CHILDREN.get(parent, {}).get(self.sobject)
            if child is None:
                raise SoqlError(
                    "INVALID_TYPE",
                    f"Didn't understand relationship '{self.sobject}' in FROM part of query "
                    "call. If you are attempting to use a custom relationship, be sure to "
                    "append the '__r' after the custom relationship name.",
                )
            self.link = self.sobject
            self.sobject = child[0]
        elif self.sobject not in SCHEMA:
            raise SoqlError("INVALID_TYPE", f"sObject type '{self.sobject}' is not supported.")
        fields = [self.field(f) for f in fields]
        after = self.at
        children = [self.subquery(at) for at in subqueries]
        self.at = after
        where = None
        if self.peek_keyword("WHERE"):
            self.take()
            where = self.condition()
        order: list[tuple[str, bool]] = []
        if self.peek_keyword("ORDER"):
            self.take()
            self.keyword("BY")
            while True:
                field = self.field(self.name())
                descending = False
                if self.peek_keyword("ASC") or self.peek_keyword("DESC"):
                    descending = self.take().text.upper() == "DESC"
                order.append((field, descending))
                if self.peek().text != ",":
                    break
                self.take()
        limit = None
        if self.peek_keyword("LIMIT"):
            self.take()
            token = self.take()
            if token.kind != "number" or "." in token.text:
                raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{token.text}'")
            limit = int(token.text)
        if parent is None and self.peek().kind != "end":
            raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{self.peek().text}'")
        return Query(self.sobject, fields, where, order, limit, children)

    def subquery(self, at: int) -> tuple[str, str, Query]:
        """The parent-child subquery whose "(" is at token ``at``."""
        inner = Parser.__new__(Parser)
        inner.tokens, inner.at, inner.sobject, inner.link = self.tokens, at + 1, "", ""
        query = inner.parse(parent=self.sobject)
        if inner.peek().text != ")":
            raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{inner.peek().text}'")
        if query.where is not None:
            raise SoqlError("MALFORMED_QUERY", "fake Salesforce: no WHERE in a subquery")
        _, parent_field = CHILDREN[self.sobject][inner.link]
        return inner.link, parent_field, query

    def skip_parentheses(self) -> None:
        depth = 0
        while True:
            token = self.take()
            if token.kind == "end":
                raise SoqlError("MALFORMED_QUERY", "unexpected token: missing ')'")
            depth += {"(": 1, ")": -1}.get(token.text, 0)
            if depth == 0:
                return

    # ---- conditions

    def condition(self) -> Callable[[dict[str, Any]], bool]:
        parts = [self.unary()]
        joiner = None
        while self.peek_keyword("AND") or self.peek_keyword("OR"):
            word = self.take().text.upper()
            if joiner is not None and word != joiner:
                # Salesforce wants parentheses where AND and OR meet
                raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{word}'")
            joiner = word
            parts.append(self.unary())
        if joiner == "OR":
            return lambda row: any(p(row) for p in parts)
        return lambda row: all(p(row) for p in parts)

    def unary(self) -> Callable[[dict[str, Any]], bool]:
        if self.peek_keyword("NOT"):
            self.take()
            inner = self.unary()
            return lambda row: not inner(row)
        if self.peek().text == "(":
            self.take()
            inner = self.condition()
            self.punct(")")
            return inner
        return self.comparison()

    def comparison(self) -> Callable[[dict[str, Any]], bool]:
        field = self.field(self.name())
        kind = self.kind(field)
        if kind == "longtext":
            raise SoqlError(
                "INVALID_FIELD",
                f"field '{field}' can not be filtered in a query call",
            )
        if self.peek_keyword("LIKE"):
            self.take()
            literal = self.literal()
            if not isinstance(literal.value, str) or kind == "id" or kind.startswith("ref"):
                raise SoqlError(
                    "INVALID_QUERY_FILTER_OPERATOR", f"invalid operator on {field} for LIKE"
                )
            pattern = like_pattern(literal.raw or "")
            return lambda row: bool(pattern.fullmatch(str(_get(row, field) or "")))
        token = self.take()
        if token.kind != "op" or token.text not in ("=", "!=", "<>"):
            raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{token.text}'")
        literal = self.literal()
        value = literal.value
        if (isinstance(value, str) and "\\%" in value) or (
            isinstance(value, str) and "\\_" in value
        ):
            raise SoqlError(
                "MALFORMED_QUERY",
                "Invalid string literal. Illegal character sequence '\\%' or '\\_' outside LIKE.",
            )
        if (kind == "id" or kind.startswith("ref")) and value is not None:
            if not isinstance(value, str) or not ID.fullmatch(value):
                raise SoqlError("INVALID_QUERY_FILTER_OPERATOR", f"invalid ID field: {value}")
        equal = token.text == "="

        def compare(row: dict[str, Any]) -> bool:
            have = _get(row, field)
            same = _same(have, value)
            return same if equal else not same

        return compare

    def literal(self) -> Literal:
        token = self.take()
        if token.kind == "string":
            return token.value
        if token.kind == "number":
            return Literal(float(token.text) if "." in token.text else int(token.text))
        upper = token.text.upper()
        if token.kind == "name" and upper in ("NULL", "TRUE", "FALSE"):
            return Literal({"NULL": None, "TRUE": True, "FALSE": False}[upper])
        raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{token.text}'")

    # ---- names

    def field(self, name: str) -> str:
        """``name`` checked against the object's fields (and a relationship's object's)."""
        fields = SCHEMA[self.sobject]
        if "." in name:
            relationship, _, inner = name.partition(".")
            found = _relationship(fields, relationship)
            if found is None or not _known(SCHEMA[found[1]], inner):
                raise SoqlError(
                    "INVALID_FIELD",
                    f"Didn't understand relationship '{relationship}' in field path. If you "
                    "are attempting to use a custom relationship, be sure to append the '__r' "
                    "after the custom relationship name.",
                )
            return f"{found[0]}.{_canonical(SCHEMA[found[1]], inner)}"
        if not _known(fields, name):
            raise SoqlError(
                "INVALID_FIELD",
                f"No such column '{name}' on entity '{self.sobject}'. If you are attempting to "
                "use a custom field, be sure to append the '__c' after the custom field name.",
            )
        return _canonical(fields, name)

    def kind(self, field: str) -> str:
        if "." in field:
            relationship, _, inner = field.partition(".")
            found = _relationship(SCHEMA[self.sobject], relationship)
            assert found is not None  # checked by field()
            return SCHEMA[found[1]][inner]
        return SCHEMA[self.sobject][field]

    def name(self) -> str:
        token = self.take()
        if token.kind != "name" or token.text.upper() in KEYWORDS:
            raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{token.text}'")
        return token.text

    # ---- tokens

    def peek(self) -> Token:
        return self.tokens[self.at]

    def peek_keyword(self, word: str) -> bool:
        token = self.peek()
        return token.kind == "name" and token.text.upper() == word

    def take(self) -> Token:
        token = self.tokens[self.at]
        if token.kind != "end":
            self.at += 1
        return token

    def keyword(self, word: str) -> None:
        if not self.peek_keyword(word):
            raise SoqlError("MALFORMED_QUERY", f"unexpected token: '{self.peek().text}'")
        self.take()

    def punct(self, char: str) -> None:
        if self.take().text != char:
            raise SoqlError("MALFORMED_QUERY", f"unexpected token: expecting '{char}'")


def like_pattern(raw: str) -> re.Pattern[str]:
    """A LIKE pattern (its literal's raw text) as a case-insensitive regular expression."""
    out, at = [], 0
    while at < len(raw):
        char = raw[at]
        if char == "\\":
            nxt = raw[at + 1 : at + 2]
            if nxt == "u":
                out.append(re.escape(chr(int(raw[at + 2 : at + 6], 16))))
                at += 6
                continue
            out.append(re.escape(_ESCAPES.get(nxt.lower() if nxt.lower() in "nrtbf" else nxt, nxt)))
            at += 2
            continue
        out.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        at += 1
    return re.compile("".join(out), re.IGNORECASE | re.DOTALL)


def parse(soql: str) -> Query:
    return Parser(soql).parse()


def _known(fields: dict[str, str], name: str) -> bool:
    return name.lower() in {f.lower() for f in fields}


def _canonical(fields: dict[str, str], name: str) -> str:
    return next(f for f in fields if f.lower() == name.lower())


def _relationship(fields: dict[str, str], name: str) -> tuple[str, str] | None:
    """(the relationship's name as spelt in SCHEMA, the object it leads to), or None."""
    for kind in fields.values():
        if kind.startswith("ref:"):
            _, target, relationship = kind.split(":")
            if relationship.lower() == name.lower():
                return relationship, target
    return None


def _get(row: dict[str, Any], field: str) -> Any:
    if "." in field:
        parent, _, inner = field.partition(".")
        return (row.get(parent) or {}).get(inner)
    return row.get(field)


def _same(have: Any, value: Any) -> bool:
    if isinstance(have, str) and isinstance(value, str):
        return have.lower() == value.lower()
    return bool(have == value)
