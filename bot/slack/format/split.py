"""Long mrkdwn -> messages Slack will post whole, cut where a reader would cut."""

from __future__ import annotations

import re
from bisect import bisect_left

import regex

from bot.slack.format.mrkdwn import FENCE

DEFAULT_LIMIT = 3000
"""Characters per message. Slack truncates `text` at 40,000 and recommends at most 4,000."""

CLOSE, REOPEN = "\n" + FENCE, FENCE + "\n"

# Never split inside these: escape entities, <links>, and a ``` fence.
_PROTECTED = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);|<[^<>\n]*>|```")
_SEPARATORS = ("\n\n", "\n", " ")
_GRAPHEME = regex.compile(r"\X")  # an extended grapheme cluster (UAX #29)


def split_message(text: str, limit: int = DEFAULT_LIMIT) -> list[str]:
    """Split mrkdwn into chunks of at most `limit` characters.

    Cuts at a paragraph break in the later half of the window, else a line break, else a space,
    else anywhere but inside an `&entity;`, a `<link>`, a ``` fence or a grapheme cluster. The
    whitespace at a cut is dropped (in code only the one separating character). A code block cut
    in two is closed and reopened. Whitespace-only chunks are not returned.
    """
    if limit < 32:
        raise ValueError(f"limit too small to split safely: {limit}")
    marks = _Marks(text)
    chunks: list[str] = []
    pos, reopened = 0, False
    while pos < len(text):
        prefix = REOPEN if reopened else ""
        budget = limit - len(prefix)
        if len(text) - pos <= budget:
            end, resume, closed, reopened = len(text), len(text), False, False
        else:
            end, resume, closed, reopened = _next_cut(text, marks, pos, budget)
        body = text[pos:end]
        if body.strip():
            chunks.append(prefix + body + (CLOSE if closed else ""))
        pos = resume
    return chunks


class _Marks:
    """Where the text's fences and unsplittable spans are."""

    def __init__(self, text: str) -> None:
        self.fences = [m.start() for m in re.finditer(FENCE, text)]
        self.spans = [(m.start(), m.end()) for m in _PROTECTED.finditer(text)]
        self.starts = [start for start, _ in self.spans]

    def in_code(self, i: int) -> bool:
        return bisect_left(self.fences, i) % 2 == 1

    def last_fence(self, i: int) -> int:
        return self.fences[bisect_left(self.fences, i) - 1]

    def protected(self, i: int) -> tuple[int, int] | None:
        """The span that a cut before text[i] would break, if any."""
        k = bisect_left(self.starts, i) - 1  # the last span starting before i
        if k >= 0 and self.spans[k][0] < i < self.spans[k][1]:
            return self.spans[k]
        return None


def _next_cut(text: str, marks: _Marks, pos: int, budget: int) -> tuple[int, int, bool, bool]:
    """(end, resume, close a code block, reopen it) for the chunk starting at `pos`."""
    end, resume = _cut(text, pos, pos + budget, marks)
    code = marks.in_code(end)
    if code and end - pos + len(CLOSE) > budget:
        end, resume = _cut(text, pos, pos + budget - len(CLOSE), marks)
        code = marks.in_code(end)
    if not code:
        return end, resume, False, False
    last_fence = marks.last_fence(end)
    if not text[last_fence + len(FENCE) : end].strip():
        if last_fence > pos:
            # Cut just after an opening fence: start the block in the next chunk instead.
            end = last_fence
            while end > pos and text[end - 1].isspace():
                end -= 1
            return end, last_fence, False, False
        # The block opens this chunk and its first line is too long: cut inside the line.
        end = _hard_cut(text, pos, pos + budget - len(CLOSE), marks)
        return end, end, True, True
    if text[resume:].lstrip(" \t\n").startswith(FENCE):
        # Cut just before the closing fence: our closing fence replaces it.
        return end, text.index(FENCE, resume) + len(FENCE), True, False
    return end, resume, True, True


def _cut(text: str, pos: int, end_max: int, marks: _Marks) -> tuple[int, int]:
    """Where to end this chunk (`end` <= `end_max`) and start the next (`resume`).

    text[end:resume] is whitespace that is dropped.
    """
    half = pos + (end_max - pos) // 2
    for lowest in (half, pos + 1):
        best = -1
        for sep in _SEPARATORS:
            i = text.rfind(sep, lowest, end_max + len(sep))
            while i >= lowest and marks.protected(i) is not None:
                i = text.rfind(sep, lowest, i)
            if i >= lowest:
                best = i
                break
        if best >= 0:
            if marks.in_code(best):
                return best, best + 1
            end, resume = best, best
            while end > pos and text[end - 1].isspace():
                end -= 1
            while resume < len(text) and text[resume].isspace():
                resume += 1
            return end, resume
    cut = _hard_cut(text, pos, end_max, marks)
    return cut, cut


def _hard_cut(text: str, pos: int, end_max: int, marks: _Marks) -> int:
    """Cut at `end_max`, or before it so as not to cut an entity, a link, a fence or a grapheme."""
    cut = end_max
    span = marks.protected(cut)
    if span is not None and span[0] > pos:
        cut = span[0]
    start = _grapheme_start(text, pos, cut)
    # One grapheme longer than a whole chunk cannot stay whole: it is cut at the limit.
    return start if start > pos else cut


def _grapheme_start(text: str, pos: int, i: int) -> int:
    """Where the grapheme cluster holding text[i] starts, or `pos` if it starts before that."""
    while i > pos:
        # \X from the previous character stops at i only where a cluster starts; it sees the
        # text before it too, so regional indicators still pair from the start of their run.
        cluster = _GRAPHEME.match(text, i - 1, i + 1)
        assert cluster is not None  # \X matches wherever a character is left
        if cluster.end() == i:
            break
        i -= 1
    return i
