"""The model's Markdown -> Slack mrkdwn, rendered from markdown-it-py's syntax tree.

CommonMark + tables + strikethrough, raw HTML off, so emphasis, code and links are recognised
exactly as a Markdown renderer would. Every piece of model text goes through `escape`; code is
kept verbatim apart from that escaping.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from bot.slack.format.escape import (
    ZWJ,
    ZWSP,
    break_fences,
    escape,
    link,
    prose,
    strip_bidi,
    verbatim,
)

FENCE = "```"
HR = "\u2500" * 10

_md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

_Line = tuple[str, bool]  # (text, is part of a code block)


def to_mrkdwn(markdown: str) -> str:
    """Convert the model's Markdown to safe Slack mrkdwn."""
    markdown = markdown.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")
    # Before parsing, so that syntax and table widths see the text as Slack will show it.
    markdown = strip_bidi(markdown)
    tree = SyntaxTreeNode(_md.parse(markdown))
    lines = _blocks(tree.children, gap=True)
    out = [line if code else line.rstrip() for line, code in lines]
    return "\n".join(out).strip("\n")


def _blocks(nodes: Sequence[SyntaxTreeNode], *, gap: bool) -> list[_Line]:
    """Render sibling blocks, separated by a blank line when `gap`."""
    out: list[_Line] = []
    for node in nodes:
        lines = _block(node)
        if not lines:
            continue
        if out and gap:
            out.append(("", False))
        out.extend(lines)
    return out


def _block(node: SyntaxTreeNode) -> list[_Line]:
    kind = node.type
    if kind == "paragraph":
        return [(line, False) for line in _inline_of(node).split("\n")]
    if kind == "heading":
        text = " ".join(_inline_of(node, strong=True).split())
        return [(f"*{text}*", False)] if text else []
    if kind in ("bullet_list", "ordered_list"):
        return _list(node)
    if kind == "blockquote":
        # Slack quotes do not nest: a quote inside a quote is just more of the same quote.
        inner = _blocks(node.children, gap=False)
        return [(_quote(line, code), code) for line, code in inner]
    if kind in ("fence", "code_block"):
        return _code_block(node.content)
    if kind == "table":
        return _table(node)
    if kind == "hr":
        return [(HR, False)]
    if kind == "html_block":  # only if raw HTML is ever enabled: show it, escaped
        return [(prose(line), False) for line in node.content.rstrip("\n").split("\n")]
    if node.children:
        return _blocks(node.children, gap=True)
    return [(prose(line), False) for line in node.content.split("\n")] if node.content else []


def _quote(line: str, code: bool) -> str:
    if line.startswith(">"):  # already quoted: the model's own ">" is always escaped
        return line
    return f"> {line}" if code else f"> {line}".rstrip()


def _code_block(content: str) -> list[_Line]:
    content = content.rstrip("\n")
    if not content.strip():
        return []
    return [(FENCE, True), *((verbatim(line), True) for line in content.split("\n")), (FENCE, True)]


def _list(node: SyntaxTreeNode) -> list[_Line]:
    loose = any(
        child.type == "paragraph" and not child.hidden
        for item in node.children
        for child in item.children
    )
    number = int(node.attrs.get("start", 1) or 1) if node.type == "ordered_list" else 0
    out: list[_Line] = []
    for item in node.children:
        marker = f"{number}. " if node.type == "ordered_list" else "\u2022 "
        number += 1
        lines = _blocks(item.children, gap=loose)
        if loose and out:
            out.append(("", False))
        if not lines:
            out.append((marker.rstrip(), False))
            continue
        first, first_code = lines[0]
        out.append((marker + first, first_code))
        for line, code in lines[1:]:
            out.append((line if code or not line else "    " + line, code))
    return out


def _table(node: SyntaxTreeNode) -> list[_Line]:
    rows: list[list[str]] = []
    aligns: list[str] = []
    header_rows = 0
    for section in node.children:
        for tr in section.children:
            cells = [" ".join(_plain_of(cell).split()) for cell in tr.children]
            if section.type == "thead":
                header_rows += 1
                aligns = [str(cell.attrs.get("style", "")) for cell in tr.children]
            rows.append(cells)
    if not rows:
        return []
    ncols = max(len(row) for row in rows)
    widths = [max(_width(row[i]) if i < len(row) else 0 for row in rows) for i in range(ncols)]

    def fmt(row: list[str]) -> str:
        cells = []
        for i in range(ncols):
            cell = row[i] if i < len(row) else ""
            pad = widths[i] - _width(cell)
            align = aligns[i] if i < len(aligns) else ""
            if "right" in align:
                cell = " " * pad + cell
            elif "center" in align:
                cell = " " * (pad // 2) + cell + " " * (pad - pad // 2)
            else:
                cell = cell + " " * pad
            cells.append(cell)
        return " | ".join(cells).rstrip()

    lines = [fmt(row) for row in rows]
    if header_rows:
        lines.insert(header_rows, "-+-".join("-" * w for w in widths))
    return [(FENCE, True), *((verbatim(line), True) for line in lines), (FENCE, True)]


def _width(text: str) -> int:
    """Display width in a monospace font: wide (CJK, emoji) characters count two."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch) or ch in (ZWJ, ZWSP, "\ufe0f", "\ufe0e"):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def _inline_of(node: SyntaxTreeNode, **flags: bool) -> str:
    """The rendered inline content of a leaf block (paragraph, heading)."""
    return break_fences("".join(_inline(child.children, **flags) for child in node.children))


def _plain_of(node: SyntaxTreeNode) -> str:
    return "".join(_plain(child.children) for child in node.children)


def _inline(
    nodes: Sequence[SyntaxTreeNode],
    *,
    strong: bool = False,
    em: bool = False,
    strike: bool = False,
) -> str:
    out: list[str] = []
    for node in nodes:
        kind = node.type
        if kind == "text":
            out.append(prose(node.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "code_inline":
            out.append(break_fences(f"`{escape(node.content)}`"))
        elif kind == "strong":
            inner = _inline(node.children, strong=True, em=em, strike=strike)
            out.append(_wrap("*", inner, already=strong))
        elif kind == "em":
            inner = _inline(node.children, strong=strong, em=True, strike=strike)
            out.append(_wrap("_", inner, already=em))
        elif kind == "s":
            inner = _inline(node.children, strong=strong, em=em, strike=True)
            out.append(_wrap("~", inner, already=strike))
        elif kind == "link" and node.markup == "autolink":
            # <https://...> typed by the model: show what it typed (Slack links the bare URL).
            out.append(prose(f"<{_plain(node.children)}>"))
        elif kind == "link":
            out.append(link(str(node.attrs.get("href", "")), _plain(node.children)))
        elif kind == "image":
            out.append(link(str(node.attrs.get("src", "")), _plain(node.children)))
        elif node.children:
            out.append(_inline(node.children, strong=strong, em=em, strike=strike))
        else:  # html_inline (raw HTML is off, but be safe) and anything unknown: show it escaped
            out.append(prose(node.content))
    return "".join(out)


def _wrap(marker: str, inner: str, *, already: bool) -> str:
    """Put `marker` around each line of `inner` (Slack formatting does not span lines)."""
    if already:
        return inner
    return "\n".join(_wrap_line(marker, line) for line in inner.split("\n"))


def _wrap_line(marker: str, line: str) -> str:
    stripped = line.strip()
    if not stripped:
        return line
    # Slack only formats when the markers hug the text: keep surrounding spaces outside them.
    lead = line[: len(line) - len(line.lstrip())]
    trail = line[len(line.rstrip()) :]
    return f"{lead}{marker}{stripped}{marker}{trail}"


def _plain(nodes: Sequence[SyntaxTreeNode]) -> str:
    """The raw (unescaped) visible text of inline nodes, without any formatting."""
    out: list[str] = []
    for node in nodes:
        if node.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif node.children:
            out.append(_plain(node.children))
        else:
            out.append(node.content)
    return "".join(out)
