"""The model's Markdown -> Markdown as inert as a posted answer, for Slack's streaming
methods (``markdown_text``), a piece at a time as the model writes it. Pure, no I/O.

Slack renders streamed text as standard Markdown, so it stays Markdown, and what `escape`
makes inert in mrkdwn is made inert here:

* every `&`, `<`, `>` is escaped (no `<!channel>`, `<@U1>` or `<url|text>`), `@here` and
  the like neutralised, bidi reordering dropped;
* an inline link `[text](url)` stays a link only when its text names no other site than
  its target (else `text (url)`); a target that is not http(s) or mailto keeps the words
  only; every other `[` and `]` is escaped, so no reference link can form later on;
* code (fenced, or in backticks) is escaped only, with `](` broken by a zero-width space.

A piece is made safe on its own only up to a place where nothing is open: ``cut`` finds the
last one (after whitespace, before the next word, outside backticks and links), and
``MarkdownSafety`` carries across pieces whether a fence is open and a line has begun.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from bot.slack.format.escape import (
    LINK_SCHEMES,
    ZWSP,
    escape,
    is_disguised,
    neutralise_mentions,
    strip_bidi,
)

#: a fence line opens or closes a code block (up to three spaces before it)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TICKS = re.compile(r"`+")
_LINK = re.compile(
    r"!?\[([^\[\]\n]*)\]\(\s*<?([^\s()<>]*)>?(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)"
)
_DIRECTIONAL = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
# what would end a Markdown link target early or hide part of it
_URL_UNSAFE = re.compile(r"[\s|<>\"`()\[\]]")


@dataclass
class MarkdownSafety:
    """What carries from one piece to the next: inside a fenced code block; at a line's start."""

    in_fence: bool = False
    at_line_start: bool = True

    def feed(self, piece: str) -> str:
        """``piece`` (from the last cut to the next) made safe; the state moves past it."""
        out = []
        for line in piece.splitlines(keepends=True):
            if self.at_line_start and _FENCE.match(line):
                self.in_fence = not self.in_fence
                out.append(escape(line))
            elif self.in_fence:
                out.append(_code(line))
            else:
                out.append(_inline(line))
            self.at_line_start = line.endswith("\n")
        return "".join(out)

    def cut(self, text: str, start: int = 0) -> int:
        """The last place after ``start`` where ``text`` may be cut and its two sides made
        safe apart (``start`` when there is none yet): after whitespace, before a word, not
        inside backticks or a link. The state is that at ``start``."""
        best, in_fence, line_start = start, self.in_fence, self.at_line_start
        position = start
        for line in text[start:].splitlines(keepends=True):
            if line_start and _FENCE.match(line):
                in_fence = not in_fence
            open_at = _open_spans(line) if not in_fence else None
            for offset in range(1, len(line) + 1):
                end = position + offset
                if end >= len(text) or not line[offset - 1].isspace() or text[end].isspace():
                    continue
                if in_fence or (open_at is not None and not open_at[offset]):
                    best = end
            position += len(line)
            line_start = line.endswith("\n")
        return best

    def closing(self) -> str:
        """What ends the text here for good (a fence left open is closed)."""
        return "\n```\n" if self.in_fence else ""

    def reopening(self) -> str:
        """What the rest, posted apart, starts with to read as it would have here."""
        return "```\n" if self.in_fence else ""


def rest_of(answer: str, held: int) -> str:
    """What is left of ``answer`` after its first ``held`` characters (streamed), to be
    posted on its own: a code block it was in goes on being one."""
    safety = MarkdownSafety()
    safety.feed(answer[:held])
    return safety.reopening() + answer[held:]


def _open_spans(line: str) -> list[bool]:
    """For each place in a line (0..len): whether a backtick span or a link is open there."""
    open_at = [False]
    ticks, brackets, target, escaped = 0, 0, False, False
    previous = ""
    for ch in line:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "`":
            if previous != "`":
                ticks ^= 1
        elif not ticks:
            if ch == "[":
                brackets += 1
            elif ch == "]" and brackets:
                brackets -= 1
            elif ch == "(" and previous == "]":
                target = True
            elif ch == ")":
                target = False
        previous = ch
        open_at.append(bool(ticks or brackets or target))
    return open_at


def _inline(line: str) -> str:
    """A line (or part of one) outside code blocks: backtick spans kept as code, the rest prose.
    A backtick run left unpaired is literal, as Markdown reads it."""
    runs = list(_TICKS.finditer(line))
    if len(runs) % 2:
        runs = runs[:-1]
    out, at = [], 0
    for opening, closing in zip(runs[::2], runs[1::2], strict=True):
        out.append(_prose(line[at : opening.start()]))
        out.append(opening.group() + _code(line[opening.end() : closing.start()]))
        out.append(closing.group())
        at = closing.end()
    out.append(_prose(line[at:]))
    return "".join(out)


def _prose(raw: str) -> str:
    """Prose: links judged, everything else escaped and neutralised."""
    out, at = [], 0
    for found in _LINK.finditer(raw):
        out.append(_words(raw[at : found.start()]))
        out.append(_link(found.group(2), found.group(1)))
        at = found.end()
    out.append(_words(raw[at:]))
    return "".join(out)


def _words(raw: str) -> str:
    text = neutralise_mentions(escape(raw))
    return text.replace("[", "\\[").replace("]", "\\]")


def _code(raw: str) -> str:
    return escape(raw).replace("](", "]" + ZWSP + "(")


def _link(href: str, raw_text: str) -> str:
    """A Markdown link, kept, written out as ``text (url)`` when its text names another site,
    or reduced to its words when it is not a link we are willing to make."""
    text = " ".join(_DIRECTIONAL.sub("", strip_bidi(raw_text)).split())
    url = href.strip()
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        linkable = scheme in LINK_SCHEMES and bool(parts.netloc or scheme == "mailto")
    except ValueError:
        linkable = False
    if not linkable:
        return _words(text or url)
    safe_url = escape(_URL_UNSAFE.sub(lambda m: quote(m.group(), safe=""), url))
    if not text:
        return f"<{safe_url}>"
    if is_disguised(text, url):
        return f"{_words(text)} ({safe_url})"
    return f"[{_words(text)}]({safe_url})"
