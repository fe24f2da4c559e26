"""Long mrkdwn -> messages Slack will post whole, cut where a reader would cut."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left

from bot.slack.format.escape import ZWJ
from bot.slack.format.mrkdwn import FENCE

DEFAULT_LIMIT = 3000
"""Characters per message. Slack truncates `text` at 40,000 and recommends at most 4,000."""

CLOSE, REOPEN = "\n" + FENCE, FENCE + "\n"

# Never split inside these: escape entities, <links>, and a ``` fence.
_PROTECTED = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);|<[^<>\n]*>|```")
_SEPARATORS = ("\n\n", "\n", " ")


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
    """Cut at `end_max`, or a little before so as not to cut an entity/link/fence or grapheme."""
    cut = end_max
    span = marks.protected(cut)
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
