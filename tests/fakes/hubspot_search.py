"""The CRM search of the fake HubSpot: the request validated as HubSpot documents it (the
keys it knows, at most 5 filter groups, 6 filters in a group and 18 in all, a ``limit`` of at
most 200, one sort), then run: groups OR'ed, a group's filters AND'ed."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MAX_GROUPS = 5
MAX_GROUP_FILTERS = 6
MAX_FILTERS = 18
MAX_LIMIT = 200
OPERATORS = {
    "EQ",
    "NEQ",
    "LT",
    "LTE",
    "GT",
    "GTE",
    "BETWEEN",
    "IN",
    "NOT_IN",
    "HAS_PROPERTY",
    "NOT_HAS_PROPERTY",
    "CONTAINS_TOKEN",
    "NOT_CONTAINS_TOKEN",
}
SEARCH_KEYS = {"filterGroups", "sorts", "query", "properties", "limit", "after"}
FILTER_KEYS = {"propertyName", "operator", "value", "values", "highValue"}

#: a record as the search sees it: its properties, and the ids it is associated with by type
Record = dict[str, Any]


class Invalid(Exception):
    """A search HubSpot refuses with a VALIDATION_ERROR."""


def validate(body: Any, properties: set[str], associations: set[str]) -> None:
    """Raise Invalid for what HubSpot's search refuses."""
    if not isinstance(body, dict):
        raise Invalid("Invalid input JSON: the body must be a JSON object.")
    for key in body:
        if key not in SEARCH_KEYS:
            raise Invalid(f'Invalid input JSON on line 1: Unrecognized field "{key}"')
    groups = body.get("filterGroups") or []
    if not isinstance(groups, list) or len(groups) > MAX_GROUPS:
        raise Invalid(f"Too many filter groups ({len(groups)}). The maximum is {MAX_GROUPS}.")
    total = 0
    for group in groups:
        if not isinstance(group, dict) or set(group) - {"filters"}:
            raise Invalid("Invalid input JSON: a filter group has only filters.")
        filters = group.get("filters") or []
        if not isinstance(filters, list) or len(filters) > MAX_GROUP_FILTERS:
            raise Invalid(
                f"Too many filters in a group ({len(filters)}). The maximum is {MAX_GROUP_FILTERS}."
            )
        total += len(filters)
        for one in filters:
            _filter(one, properties, associations)
    if total > MAX_FILTERS:
        raise Invalid(f"Too many filters ({total}). The maximum is {MAX_FILTERS}.")
    limit = body.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= MAX_LIMIT:
        raise Invalid(f"limit must be between 1 and {MAX_LIMIT} (got {limit}).")
    sorts = body.get("sorts") or []
    if not isinstance(sorts, list) or len(sorts) > 1:
        raise Invalid("Only one sort is allowed.")
    for sort in sorts:
        name = sort.get("propertyName") if isinstance(sort, dict) else sort
        if name not in properties:
            raise Invalid(f"Invalid sort: property {name!r} does not exist.")
        if isinstance(sort, dict) and sort.get("direction", "ASCENDING") not in (
            "ASCENDING",
            "DESCENDING",
        ):
            raise Invalid("A sort's direction is ASCENDING or DESCENDING.")
    asked = body.get("properties") or []
    if not isinstance(asked, list) or not all(isinstance(p, str) for p in asked):
        raise Invalid("properties must be a list of property names.")


def _filter(one: Any, properties: set[str], associations: set[str]) -> None:
    if not isinstance(one, dict):
        raise Invalid("Invalid input JSON: a filter is an object.")
    for key in one:
        if key not in FILTER_KEYS:
            raise Invalid(f'Invalid input JSON: Unrecognized field "{key}" in a filter')
    name, operator = one.get("propertyName"), one.get("operator")
    if operator not in OPERATORS:
        raise Invalid(f"Unknown operator {operator!r}.")
    if name not in properties and not (
        isinstance(name, str) and name.startswith("associations.") and name[13:] in associations
    ):
        raise Invalid(f"There was a problem with the request: property {name!r} does not exist.")
    if operator in {"EQ", "NEQ", "CONTAINS_TOKEN", "NOT_CONTAINS_TOKEN"} and not isinstance(
        one.get("value"), str
    ):
        raise Invalid(f"The operator {operator} needs a string value.")


def run(body: dict[str, Any], records: dict[str, Record]) -> list[tuple[str, Record]]:
    """The records matching the search, sorted and cut to its limit."""
    groups = [[_matcher(f) for f in g.get("filters") or []] for g in body.get("filterGroups") or []]
    found = [
        (record_id, record)
        for record_id, record in records.items()
        if not groups or any(all(test(record) for test in group) for group in groups)
    ]
    for sort in body.get("sorts") or []:
        name = sort["propertyName"] if isinstance(sort, dict) else sort
        descending = isinstance(sort, dict) and sort.get("direction") == "DESCENDING"
        found.sort(key=lambda item, n=name: str(item[1]["properties"].get(n) or "").lower())
        if descending:
            found.reverse()
    return found[: body.get("limit", 10)]


def _matcher(one: dict[str, Any]) -> Callable[[Record], bool]:
    name, operator, value = one["propertyName"], one["operator"], one.get("value")
    if name.startswith("associations."):
        kind = name[13:]
        return lambda record: str(value) in record["associations"].get(kind, ())
    if operator == "EQ":
        return lambda record: str(record["properties"].get(name) or "").lower() == value.lower()
    if operator == "CONTAINS_TOKEN":
        return lambda record: contains_token(record["properties"].get(name), value)
    if operator == "NOT_CONTAINS_TOKEN":
        return lambda record: not contains_token(record["properties"].get(name), value)
    if operator == "HAS_PROPERTY":
        return lambda record: bool(record["properties"].get(name))
    raise NotImplementedError(f"fake HubSpot: operator {operator}")


def contains_token(text: Any, value: str) -> bool:
    """HubSpot's CONTAINS_TOKEN: a word of the text equals the value (case-insensitive); a
    ``*`` in the value matches any characters, so ``*ana*`` finds "Ana" anywhere."""
    if not text:
        return False
    if "*" in value:
        pattern = ".*".join(re.escape(part) for part in value.split("*"))
        return re.fullmatch(pattern, str(text), re.IGNORECASE | re.DOTALL) is not None
    words = re.split(r"[\s<>]+", str(text).lower())
    return value.lower() in words
