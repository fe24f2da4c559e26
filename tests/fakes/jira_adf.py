"""The Atlassian Document Format as the fake Jira checks it: REST API v3 takes rich text
(a comment's body, a description) only as an ADF document, v2 only as a string (wiki
markup). Written from Atlassian's ADF structure reference (developer.atlassian.com, "Atlassian
Document Format"): the nodes the bot sends and their allowed children, marks and attrs.

``problem(doc)`` says what is wrong with a document (None: valid); ``as_text`` is what v2
shows of one (Jira renders ADF to wiki text there), ``as_document`` what v3 shows of text.
"""

from __future__ import annotations

from typing import Any

_INLINE = {"text", "hardBreak", "mention", "emoji", "inlineCard"}
_BLOCKS = {
    "paragraph",
    "heading",
    "bulletList",
    "orderedList",
    "blockquote",
    "codeBlock",
    "rule",
    "table",
    "panel",
}
#: each node: the children it may hold (None: none at all)
_CHILDREN: dict[str, set[str] | None] = {
    "doc": _BLOCKS,
    "paragraph": _INLINE,
    "heading": _INLINE,
    "bulletList": {"listItem"},
    "orderedList": {"listItem"},
    "listItem": {"paragraph", "bulletList", "orderedList", "codeBlock"},
    "blockquote": {"paragraph", "bulletList", "orderedList", "codeBlock"},
    "codeBlock": {"text"},
    "rule": None,
    "table": {"tableRow"},
    "tableRow": {"tableHeader", "tableCell"},
    "tableHeader": _BLOCKS - {"table"},
    "tableCell": _BLOCKS - {"table"},
    "panel": {"paragraph", "bulletList", "orderedList", "heading"},
    "text": None,
    "hardBreak": None,
    "mention": None,
    "emoji": None,
    "inlineCard": None,
}
#: nodes that must have at least one child
_NOT_EMPTY = {"bulletList", "orderedList", "listItem", "blockquote", "table", "tableRow"}
_MARKS = {"strong", "em", "strike", "code", "link", "underline", "subsup", "textColor"}


def problem(document: Any) -> str | None:
    """What is wrong with ``document`` as an ADF document (None: it is one)."""
    if not isinstance(document, dict) or document.get("type") != "doc":
        return "not a document"
    if document.get("version") != 1:
        return "version must be 1"
    if not isinstance(document.get("content"), list):
        return "a document has content"
    return _node_problem(document)


def _node_problem(node: Any) -> str | None:
    if not isinstance(node, dict) or node.get("type") not in _CHILDREN:
        return f"unknown node {node.get('type') if isinstance(node, dict) else node!r}"
    kind = node["type"]
    allowed = _CHILDREN[kind]
    content = node.get("content")
    if content is not None and (allowed is None or not isinstance(content, list)):
        return f"{kind} has no content"
    if kind in _NOT_EMPTY and not content:
        return f"{kind} must have content"
    if kind == "text":
        if not isinstance(node.get("text"), str) or not node["text"]:
            return "a text node needs non-empty text"
        marks = node.get("marks") or []
        if not isinstance(marks, list) or any(
            not isinstance(m, dict) or m.get("type") not in _MARKS for m in marks
        ):
            return "unknown mark"
        kinds = {m["type"] for m in marks}
        if "code" in kinds and kinds - {"code", "link"}:
            return "code combines with link alone"
        for mark in marks:
            if mark["type"] == "link" and not (mark.get("attrs") or {}).get("href"):
                return "a link mark needs an href"
    if kind == "heading" and (node.get("attrs") or {}).get("level") not in range(1, 7):
        return "heading level must be 1 to 6"
    for child in content or []:
        if not isinstance(child, dict) or child.get("type") not in (allowed or set()):
            shown = child.get("type") if isinstance(child, dict) else child
            return f"{shown} cannot be inside {kind}"
        if kind == "codeBlock" and child.get("marks"):
            return "code block text has no marks"
        found = _node_problem(child)
        if found:
            return found
    return None


def as_text(value: Any) -> str | None:
    """What API v2 shows of rich text: a string as it is, a document's words."""
    if value is None or isinstance(value, str):
        return value
    lines: list[str] = []
    current: list[str] = []

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        if node.get("type") == "text":
            current.append(node.get("text", ""))
        elif node.get("type") == "hardBreak":
            current.append("\n")
        for child in node.get("content") or []:
            walk(child)
        if node.get("type") in {"paragraph", "heading", "codeBlock", "rule"}:
            lines.append("".join(current))
            current.clear()

    walk(value)
    return "\n\n".join(lines)


def as_document(value: Any) -> Any:
    """What API v3 shows of rich text: a document as it is, a string as one paragraph each."""
    if value is None or isinstance(value, dict):
        return value
    paragraphs = [p for p in str(value).split("\n\n") if p]
    return {
        "type": "doc",
        "version": 1,
        "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": p}]} for p in paragraphs
        ],
    }
