"""The model's Markdown as Jira takes rich text: the Atlassian Document Format (``to_adf``,
for REST API v3 on Cloud) or wiki markup (``to_wiki``, for API v2 on Server / Data Center,
and on Cloud where v2 is used). Pure, no I/O.

Both are rendered from markdown-it-py's syntax tree (CommonMark + tables + strikethrough,
raw HTML off), so what is a list, a code block or a link is what any Markdown renderer
would say. A line break the model wrote stays one. A link keeps its target only when it is
http(s) or mailto; other text is never markup in Jira (wiki's special characters are
escaped).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

_md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

Node = dict[str, Any]
_MARKS = {"strong": "strong", "em": "em", "s": "strike"}
_LINK_SCHEMES = ("http://", "https://", "mailto:")
#: code languages wiki markup's {code} knows; others are shown as {noformat}
_WIKI_LANGUAGES = frozenset(
    "bash c cpp csharp css diff go groovy html java javascript json kotlin perl php "
    "python ruby scala sql swift xml yaml".split()
)
#: wiki markup's own characters, escaped with a backslash where they could start markup
_WIKI_SPECIAL = re.compile(r"[{}\[\]|]|(?<![\w])[*_+^~?!-]|[*_+^~?!-](?![\w])")


def _tree(markdown: str) -> SyntaxTreeNode:
    text = markdown.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")
    return SyntaxTreeNode(_md.parse(text))


def _href(node: SyntaxTreeNode) -> str | None:
    href = str(node.attrs.get("href") or "")
    return href if href.lower().startswith(_LINK_SCHEMES) else None


# ---- ADF


def to_adf(markdown: str) -> Node:
    """An ADF document (``{"type": "doc", "version": 1, ...}``) of ``markdown``."""
    return {"type": "doc", "version": 1, "content": _adf_blocks(_tree(markdown).children)}


def _adf_blocks(nodes: Sequence[SyntaxTreeNode]) -> list[Node]:
    blocks: list[Node] = []
    for node in nodes:
        block = _adf_block(node)
        if block is not None:
            blocks.append(block)
    return blocks


def _adf_block(node: SyntaxTreeNode) -> Node | None:
    kind = node.type
    if kind == "paragraph":
        return _with_content({"type": "paragraph"}, _adf_inline_of(node))
    if kind == "heading":
        level = int(node.tag[1:]) if node.tag[1:].isdigit() else 1
        return _with_content(
            {"type": "heading", "attrs": {"level": level}}, _adf_inline_of(node, breaks=False)
        )
    if kind in ("bullet_list", "ordered_list"):
        items = [
            {"type": "listItem", "content": _adf_blocks(item.children) or [_empty()]}
            for item in node.children
        ]
        if kind == "bullet_list":
            return {"type": "bulletList", "content": items}
        start = int(str(node.attrs.get("start") or 1))
        return {"type": "orderedList", "attrs": {"order": start}, "content": items}
    if kind == "blockquote":
        return {"type": "blockquote", "content": _adf_blocks(node.children) or [_empty()]}
    if kind in ("fence", "code_block"):
        code = node.content.rstrip("\n")
        block: Node = {"type": "codeBlock"}
        language = node.info.strip().split(" ")[0] if kind == "fence" else ""
        if language:
            block["attrs"] = {"language": language}
        return _with_content(block, [{"type": "text", "text": code}] if code else [])
    if kind == "hr":
        return {"type": "rule"}
    if kind == "table":
        rows = [row for part in node.children for row in part.children]
        return {
            "type": "table",
            "content": [
                {
                    "type": "tableRow",
                    "content": [
                        {
                            "type": "tableHeader" if cell.type == "th" else "tableCell",
                            "content": [_with_content({"type": "paragraph"}, _adf_inline(cell))],
                        }
                        for cell in row.children
                    ],
                }
                for row in rows
            ],
        }
    return None


def _empty() -> Node:
    return {"type": "paragraph"}


def _with_content(node: Node, content: list[Node]) -> Node:
    if content:
        node["content"] = content
    return node


def _adf_inline_of(node: SyntaxTreeNode, *, breaks: bool = True) -> list[Node]:
    inline = node.children[0] if node.children and node.children[0].type == "inline" else node
    return _adf_inline(inline, breaks=breaks)


def _adf_inline(
    node: SyntaxTreeNode, marks: tuple[Node, ...] = (), *, breaks: bool = True
) -> list[Node]:
    out: list[Node] = []
    for child in node.children:
        kind = child.type
        if kind == "text":
            _add_text(out, child.content, marks)
        elif kind == "code_inline":
            # code combines with a link alone
            kept = tuple(m for m in marks if m["type"] == "link")
            _add_text(out, child.content, (*kept, {"type": "code"}))
        elif kind in ("softbreak", "hardbreak"):
            if breaks:
                out.append({"type": "hardBreak"})
            else:
                _add_text(out, " ", marks)
        elif kind in _MARKS:
            out += _adf_inline(child, (*marks, {"type": _MARKS[kind]}), breaks=breaks)
        elif kind == "link":
            href = _href(child)
            link = ({"type": "link", "attrs": {"href": href}},) if href else ()
            out += _adf_inline(child, (*marks, *link), breaks=breaks)
        elif kind == "image":
            alt = "".join(c.content for c in child.children if c.type == "text")
            _add_text(out, f"{alt} ({child.attrs.get('src', '')})".strip(), marks)
        else:
            out += _adf_inline(child, marks, breaks=breaks)
    return out


def _add_text(out: list[Node], text: str, marks: tuple[Node, ...]) -> None:
    if not text:
        return
    node: Node = {"type": "text", "text": text}
    if marks:
        node["marks"] = list(marks)
    previous = out[-1] if out else None
    if previous and previous["type"] == "text" and previous.get("marks") == node.get("marks"):
        previous["text"] += text
    else:
        out.append(node)


# ---- wiki markup


def to_wiki(markdown: str) -> str:
    """``markdown`` as Jira wiki markup."""
    return "\n\n".join(b for b in (_wiki_block(n) for n in _tree(markdown).children) if b)


def _wiki_block(node: SyntaxTreeNode, bullets: str = "") -> str:
    kind = node.type
    if kind == "paragraph":
        return _wiki_inline_of(node, newline=" " if bullets else "\n")
    if kind == "heading":
        level = node.tag[1:] if node.tag[1:].isdigit() else "1"
        return f"h{level}. {_wiki_inline_of(node, newline=' ')}"
    if kind in ("bullet_list", "ordered_list"):
        mark = bullets + ("*" if kind == "bullet_list" else "#")
        lines = []
        for item in node.children:
            children = list(item.children)
            head = (
                _wiki_block(children.pop(0), mark)
                if children[:1] and (children[0].type == "paragraph")
                else ""
            )
            lines.append(f"{mark} {head}")
            lines += [_wiki_block(child, mark) for child in children]
        return "\n".join(line for line in lines if line)
    if kind == "blockquote":
        inner = "\n\n".join(b for b in (_wiki_block(n) for n in node.children) if b)
        return f"{{quote}}\n{inner}\n{{quote}}"
    if kind in ("fence", "code_block"):
        code = node.content.rstrip("\n").replace("{code}", "{ code}").replace("{noformat}", "")
        language = node.info.strip().split(" ")[0].lower() if kind == "fence" else ""
        if language in _WIKI_LANGUAGES:
            return f"{{code:{language}}}\n{code}\n{{code}}"
        return f"{{noformat}}\n{code}\n{{noformat}}"
    if kind == "hr":
        return "----"
    if kind == "table":
        lines = []
        for part in node.children:
            for row in part.children:
                bar = "||" if part.type == "thead" else "|"
                cells = [_wiki_inline(cell, newline=" ") or " " for cell in row.children]
                lines.append(bar + bar.join(cells) + bar)
        return "\n".join(lines)
    return ""


def _wiki_inline_of(node: SyntaxTreeNode, *, newline: str) -> str:
    inline = node.children[0] if node.children and node.children[0].type == "inline" else node
    return _wiki_inline(inline, newline=newline)


def _wiki_inline(node: SyntaxTreeNode, *, newline: str) -> str:
    out: list[str] = []
    for child in node.children:
        kind = child.type
        if kind == "text":
            out.append(_escape(child.content))
        elif kind == "code_inline":
            out.append("{{" + child.content.replace("}}", "} }") + "}}")
        elif kind in ("softbreak", "hardbreak"):
            out.append(newline)
        elif kind in _MARKS:
            effect = {"strong": "*", "em": "_", "s": "-"}[kind]
            inner = _wiki_inline(child, newline=newline)
            out.append(f"{effect}{inner}{effect}" if inner.strip() else inner)
        elif kind == "link":
            text = _wiki_inline(child, newline=" ")
            href = _href(child)
            out.append(f"[{text}|{href}]" if href else text)
        elif kind == "image":
            alt = "".join(c.content for c in child.children if c.type == "text")
            out.append(_escape(f"{alt} ({child.attrs.get('src', '')})".strip()))
        else:
            out.append(_wiki_inline(child, newline=newline))
    return "".join(out)


def _escape(text: str) -> str:
    escaped = _WIKI_SPECIAL.sub(lambda m: "\\" + m.group(0), text)
    # a line may not start a list, heading or quote of its own
    return re.sub(r"(?m)^(#|h[1-6]\.|bq\.)", r"\\\1", escaped)


def plain_text(document: Any) -> str:
    """The words of an ADF document (or wiki text as it is): what a person reads, for
    comparing what was sent with what Jira holds."""
    if isinstance(document, str) or document is None:
        return document or ""
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "text":
                parts.append(str(node.get("text") or ""))
            for child in node.get("content") or []:
                walk(child)
            if node.get("type") in ("paragraph", "heading", "hardBreak", "codeBlock"):
                parts.append("\n")

    walk(document)
    return "".join(parts)
