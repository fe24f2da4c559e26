"""The model's Markdown -> safe Slack mrkdwn, split into postable chunks. Pure functions, no I/O.

    format_answer(markdown) == split_message(to_mrkdwn(markdown))

The model's text is untrusted, so the conversion is also a sanitiser:

* every `&`, `<`, `>` that comes from the model is escaped (`&amp;`, `&lt;`, `&gt;`), so text such
  as `<!channel>`, `<@U123>`, `<#C1>` or `<https://evil|click>` shows literally and can neither
  ping anyone nor disguise a link;
* the words `@channel`, `@here`, `@everyone` get a zero-width joiner after the `@`;
* the only `<...>` in the output are links made from Markdown links to http(s)/mailto URLs, and a
  link whose text looks like a different URL, domain or e-mail address than its target is written
  out plainly as `text (url)` instead.

Markdown is parsed with markdown-it-py (CommonMark + tables + strikethrough, raw HTML off) and
rendered from the syntax tree, so emphasis, code and links are recognised exactly as a Markdown
renderer would. Code spans and code blocks are kept verbatim apart from the required escaping (and
runs of three backticks inside them, which Slack cannot represent, get a zero-width space).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Sequence
from urllib.parse import quote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

__all__ = [
    "DEFAULT_LIMIT",
    "escape",
    "format_answer",
    "neutralise_mentions",
    "split_message",
    "to_mrkdwn",
]

DEFAULT_LIMIT = 3000
"""Characters per message. Slack truncates `text` at 40,000 and recommends at most 4,000."""

FENCE = "```"
ZWJ = "\u200d"
ZWSP = "\u200b"
HR = "\u2500" * 10
LINK_SCHEMES = frozenset({"http", "https", "mailto"})

_md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

# "@here" etc., but not the domain of an e-mail address such as ops@here.com.
_MENTION_WORD = re.compile(r"@(?=(?:channel|here|everyone)\b(?!\.\w))", re.IGNORECASE)
_BACKTICK_RUN = re.compile(r"(?<=``)(?=`)")
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f]")
_URL_UNSAFE = re.compile(r"[\s|<>\"`]")

# What a link's visible text must not contain unless it names the link's own target.
_EMAIL = re.compile(r"[\w.+-]+@((?:[^\W_](?:[\w-]*[^\W_])?\.)+[^\W\d_]{2,63})(?![\w-])")
_SCHEME_URL = re.compile(r"[a-z][a-z0-9+.-]*://([^\s/?#|<>]+)", re.IGNORECASE)
_DOMAIN = re.compile(
    r"(?<![\w.])((?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+[^\W\d_]{2,63})(?!\w|\.[^\W_])"
)
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.])")

# Never split inside these: escape entities, <links>, and a ``` fence.
_PROTECTED = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);|<[^<>\n]*>|```")
_SEPARATORS = ("\n\n", "\n", " ")


# --------------------------------------------------------------------------------------------
# Escaping


def escape(text: str) -> str:
    """Escape the three characters Slack requires escaped: `&`, `<`, `>`. Nothing else."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def neutralise_mentions(text: str) -> str:
    """Put a zero-width joiner after the `@` of `@channel`, `@here` and `@everyone`.

    Applied to prose and link text; code spans and blocks are left verbatim (Slack never
    highlights or notifies anything inside code).
    """
    return _MENTION_WORD.sub("@" + ZWJ, text)


def _text(raw: str) -> str:
    """Model prose -> mrkdwn: escaped, broadcast words neutralised, no ``` runs."""
    return _break_fences(neutralise_mentions(escape(raw)))


def _code(raw: str) -> str:
    """Model code -> mrkdwn: escaped (Slack needs it even in code) and no ``` runs."""
    return _break_fences(escape(raw))


def _break_fences(text: str) -> str:
    """Slack has no way to show ``` inside text or code; break such runs with a zero-width space."""
    return _BACKTICK_RUN.sub(ZWSP, text)


# --------------------------------------------------------------------------------------------
# Markdown -> mrkdwn

_Line = tuple[str, bool]  # (text, is part of a code block)


def to_mrkdwn(markdown: str) -> str:
    """Convert the model's Markdown to safe Slack mrkdwn (see the module docstring)."""
    markdown = markdown.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")
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
        return [(_text(line), False) for line in node.content.rstrip("\n").split("\n")]
    if node.children:
        return _blocks(node.children, gap=True)
    return [(_text(line), False) for line in node.content.split("\n")] if node.content else []


def _quote(line: str, code: bool) -> str:
    if line.startswith(">"):  # already quoted: the model's own ">" is always escaped
        return line
    return f"> {line}" if code else f"> {line}".rstrip()


def _code_block(content: str) -> list[_Line]:
    content = content.rstrip("\n")
    if not content.strip():
        return []
    return [(FENCE, True), *((_code(line), True) for line in content.split("\n")), (FENCE, True)]


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
    return [(FENCE, True), *((_code(line), True) for line in lines), (FENCE, True)]


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
    return _break_fences("".join(_inline(child.children, **flags) for child in node.children))


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
            out.append(_text(node.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "code_inline":
            out.append(_break_fences(f"`{escape(node.content)}`"))
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
            out.append(_text(f"<{_plain(node.children)}>"))
        elif kind == "link":
            out.append(_link(str(node.attrs.get("href", "")), _plain(node.children)))
        elif kind == "image":
            out.append(_link(str(node.attrs.get("src", "")), _plain(node.children)))
        elif node.children:
            out.append(_inline(node.children, strong=strong, em=em, strike=strike))
        else:  # html_inline (raw HTML is off, but be safe) and anything unknown: show it escaped
            out.append(_text(node.content))
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


def _link(href: str, raw_text: str) -> str:
    text = " ".join(_BIDI_CONTROLS.sub("", raw_text).split())
    url = href.strip()
    try:
        parts = urlsplit(url)
        linkable = parts.scheme.lower() in LINK_SCHEMES and bool(
            parts.netloc or parts.scheme.lower() == "mailto"
        )
    except ValueError:
        linkable = False
    if not linkable:
        # Not a link we are willing to make: keep the words, drop the target.
        return _text(text) if text else _text(url)
    safe_url = escape(_URL_UNSAFE.sub(lambda m: quote(m.group(), safe=""), url))
    label = re.sub(r"[|<>]", "", text).strip()
    if not label:
        return f"<{safe_url}>"
    if _is_disguised(label, url):
        return f"{_text(text)} ({safe_url})"
    return f"<{safe_url}|{_break_fences(neutralise_mentions(escape(label)))}>"


def _norm_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if "@" in host:
        host = host.rsplit("@", 1)[1]
    if ":" in host and not host.startswith("["):
        host = host.split(":", 1)[0]
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        pass
    return host.removeprefix("www.")


def _is_disguised(label: str, url: str) -> bool:
    """Does the link text name a different site (or address) than the link goes to?"""
    parts = urlsplit(url)
    if parts.scheme.lower() == "mailto":
        address = parts.path.lower()
        target = _norm_host(address.rsplit("@", 1)[-1]) if "@" in address else ""
    else:
        address = ""
        target = _norm_host(parts.hostname or "")

    def same_site(shown: str) -> bool:
        shown = _norm_host(shown)
        return bool(target) and (shown == target or target.endswith("." + shown))

    for email in _EMAIL.finditer(label):
        if email.group(0).lower() != address:
            return True
    rest = _EMAIL.sub(" ", label)
    for found in _SCHEME_URL.finditer(rest):
        if not same_site(found.group(1)):
            return True
    rest = _SCHEME_URL.sub(" ", rest)
    for pattern in (_DOMAIN, _IPV4):
        for found in pattern.finditer(rest):
            if not same_site(found.group(0)):
                return True
    return False


# --------------------------------------------------------------------------------------------
# Splitting


def format_answer(markdown: str) -> list[str]:
    """The model's Markdown as a list of mrkdwn message texts (empty if there is nothing to say)."""
    return split_message(to_mrkdwn(markdown))


def split_message(text: str, limit: int = DEFAULT_LIMIT) -> list[str]:
    """Split mrkdwn into chunks of at most `limit` characters.

    Cuts at a paragraph break if there is one in the later half of the window, else at a line
    break, else at a space, else anywhere (but never inside an `&entity;`, a `<link>`, a ``` fence
    or a grapheme cluster). The whitespace at a cut is dropped (inside a code block only the one
    separating character); nothing else is lost. A code block cut in two is closed at the end of
    the first chunk and reopened at the start of the next. Whitespace-only chunks are not returned.
    """
    if limit < 32:
        raise ValueError(f"limit too small to split safely: {limit}")
    close, reopen = "\n" + FENCE, FENCE + "\n"
    fences = [m.start() for m in re.finditer(FENCE, text)]
    spans = [(m.start(), m.end()) for m in _PROTECTED.finditer(text)]
    span_starts = [start for start, _ in spans]

    def in_code(i: int) -> bool:
        return bisect_left(fences, i) % 2 == 1

    def protected(i: int) -> tuple[int, int] | None:
        k = bisect_left(span_starts, i) - 1  # the last span starting before i
        if k >= 0 and spans[k][0] < i < spans[k][1]:
            return spans[k]
        return None

    chunks: list[str] = []
    pos, n, reopened = 0, len(text), False
    while pos < n:
        prefix = reopen if reopened else ""
        budget = limit - len(prefix)
        if n - pos <= budget:
            if text[pos:].strip():
                chunks.append(prefix + text[pos:])
            break
        end, resume = _cut(text, pos, pos + budget, protected, in_code)
        code = in_code(end)
        if code and end - pos + len(close) > budget:
            end, resume = _cut(text, pos, pos + budget - len(close), protected, in_code)
            code = in_code(end)
        if code:
            last_fence = fences[bisect_left(fences, end) - 1]
            tail = text[last_fence + len(FENCE) : end]
            if not tail.strip() and last_fence > pos:
                # Cut just after an opening fence: start the block in the next chunk instead.
                end, resume, code = last_fence, last_fence, False
                while end > pos and text[end - 1].isspace():
                    end -= 1
            elif not tail.strip():
                # The block opens this chunk and its first line is too long: cut inside the line.
                end = resume = _hard_cut(text, pos, pos + budget - len(close), protected)
            elif text[resume:].lstrip(" \t\n").startswith(FENCE):
                # Cut just before the closing fence: our closing fence replaces it.
                resume = text.index(FENCE, resume) + len(FENCE)
                body = text[pos:end]
                if body.strip():
                    chunks.append(prefix + body + close)
                pos, reopened = resume, False
                continue
        body = text[pos:end]
        if body.strip():
            chunks.append(prefix + body + (close if code else ""))
        pos, reopened = resume, code
    return chunks


def _cut(
    text: str,
    pos: int,
    end_max: int,
    protected: Callable[[int], tuple[int, int] | None],
    in_code: Callable[[int], bool],
) -> tuple[int, int]:
    """Where to end this chunk (index `end`) and start the next (`resume`), with end <= end_max.

    text[end:resume] is whitespace that is dropped.
    """
    half = pos + (end_max - pos) // 2
    for lowest in (half, pos + 1):
        best = -1
        for sep in _SEPARATORS:
            i = text.rfind(sep, lowest, end_max + len(sep))
            while i >= lowest and protected(i) is not None:
                i = text.rfind(sep, lowest, i)
            if i >= lowest:
                best = i
                break
        if best >= 0:
            if in_code(best):
                return best, best + 1
            end, resume = best, best
            while end > pos and text[end - 1].isspace():
                end -= 1
            while resume < len(text) and text[resume].isspace():
                resume += 1
            return end, resume
    cut = _hard_cut(text, pos, end_max, protected)
    return cut, cut


def _hard_cut(
    text: str, pos: int, end_max: int, protected: Callable[[int], tuple[int, int] | None]
) -> int:
    """Cut at `end_max`, or a little before so as not to cut an entity/link/fence or grapheme."""
    cut = end_max
    span = protected(cut)
    if span is not None and span[0] > pos:
        cut = span[0]
    while cut > pos + 1 and _joined(text, cut):
        cut -= 1
    return cut


def _joined(text: str, i: int) -> bool:
    """Would cutting between text[i-1] and text[i] break a user-perceived character?"""
    after, before = text[i], text[i - 1]
    if before == ZWJ or after == ZWJ or unicodedata.combining(after):
        return True
    if "\ufe00" <= after <= "\ufe0f" or "\U0001f3fb" <= after <= "\U0001f3ff":
        return True
    if "\U000e0020" <= after <= "\U000e007f":  # emoji tag sequences (subdivision flags)
        return True
    if unicodedata.category(after) in ("Mn", "Me", "Mc"):
        return True
    ri = _is_regional_indicator
    if ri(after) and ri(before):
        run = 0
        while i - 1 - run >= 0 and ri(text[i - 1 - run]):
            run += 1
        return run % 2 == 1
    return False


def _is_regional_indicator(ch: str) -> bool:
    return "\U0001f1e6" <= ch <= "\U0001f1ff"
