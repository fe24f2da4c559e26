"""Streamed Markdown: as inert as a posted answer, and the same however it is cut."""

from __future__ import annotations

import pytest

from bot.slack.format import ZWJ, ZWSP
from bot.slack.format.markdown import MarkdownSafety

SAMPLES = [
    "**Ana** works at [Acme](https://acme.example). See `code <x>` and more.\n\n- one\n- two",
    "Plan:\n```python\nif a < b and c > d:\n    print('[x](y)')\n```\nDone, @here & <!channel>.",
    "A [link with [brackets]](https://x.example) then [good.com](https://evil.example) ok",
    "Ticket TASK-123 is *open*; owner <@U123>, see <https://evil|click> and [r][1]\n\n[1]: https://e",
    "Lone ` backtick then [bank.com](https://phish.example) at the end",
]


def fed_whole(text: str) -> str:
    return MarkdownSafety().feed(text)


def fed_in_pieces(text: str, grow: int) -> str:
    """As the stream does it: the text arrives ``grow`` characters at a time, each cut fed."""
    safety, out, done = MarkdownSafety(), [], 0
    for end in range(grow, len(text) + grow, grow):
        arrived = text[:end]
        cut = safety.cut(arrived, done)
        out.append(safety.feed(arrived[done:cut]))
        done = cut
    out.append(safety.feed(text[done:]))
    return "".join(out)


@pytest.mark.parametrize("text", SAMPLES)
@pytest.mark.parametrize("grow", [1, 3, 17])
def test_pieces_read_as_the_whole(text: str, grow: int) -> None:
    assert fed_in_pieces(text, grow) == fed_whole(text)


def test_no_pings_and_no_disguised_links() -> None:
    shown = fed_whole(SAMPLES[3] + " @channel")
    assert "<" not in shown and ">" not in shown
    assert "&lt;@U123&gt;" in shown and "&lt;https://evil|click&gt;" in shown
    assert f"@{ZWJ}channel" in shown
    # a reference link can never form: its brackets are escaped
    assert "\\[r\\]\\[1\\]" in shown and "\\[1\\]: https://e" in shown


def test_links_are_kept_only_when_they_say_where_they_go() -> None:
    shown = fed_whole(SAMPLES[2] + " [click](javascript:alert(1)) [x](https://a.example/p q)")
    assert "good.com (https://evil.example)" in shown
    assert "](https://evil.example)" not in shown
    # what is not read as a link of ours is no link at all: its brackets are escaped
    assert "\\[click\\](javascript:alert(1))" in shown
    assert "\\[x\\](https://a.example/p q)" in shown
    assert fed_whole("[run](javascript:alert) [mail](mailto:a@b.example)") == (
        "run [mail](mailto:a@b.example)"
    )


def test_code_is_escaped_only() -> None:
    shown = fed_whole(SAMPLES[1])
    assert "if a &lt; b and c &gt; d:" in shown
    assert f"'[x]{ZWSP}(y)'" in shown  # no link can be made from code either
    assert "@here" not in shown and f"@{ZWJ}here" in shown


def test_bidi_controls_are_dropped() -> None:
    assert fed_whole("pay \u202eevil\u202c now") == "pay evil now"


def test_a_fence_left_open_is_closed_and_reopened() -> None:
    safety = MarkdownSafety()
    safety.feed("Here:\n```\nx = 1\n")
    assert safety.closing() == "\n```\n"
    assert safety.reopening() == "```\n"
    safety.feed("```\n")
    assert safety.closing() == safety.reopening() == ""


def test_a_cut_is_never_inside_a_link_or_code() -> None:
    safety = MarkdownSafety()
    text = "See [the docs](https://docs.example/a b) and `a b c` now"
    cuts = set()
    done = 0
    for end in range(1, len(text) + 1):
        done = safety.cut(text[:end], 0)
        cuts.add(done)
    assert all(not (5 <= c <= 40) for c in cuts)
    assert all(not (46 <= c <= 52) for c in cuts)
    assert {4, 41, 45, 53} <= cuts  # before and after each, it may
