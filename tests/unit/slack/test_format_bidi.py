"""Bidi controls in model text: the ones that can reorder what a reader sees never reach Slack."""

from __future__ import annotations

import json

import pytest

from bot.messages import ToolCall
from bot.slack.cards import approval_card
from bot.slack.format import ZWJ, ZWSP, escape, format_answer, split_message, to_mrkdwn
from bot.turn import TurnState

# Embeddings, overrides (LRE RLE PDF LRO RLO) and isolates (LRI RLI FSI PDI): "Trojan Source".
REORDERING = [*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
MARKS = ["\u200e", "\u200f", "\u061c"]  # LRM, RLM, ALM: no reordering of letters, RTL needs them


def no_reordering(text: str) -> bool:
    return not any(ch in text for ch in REORDERING)


@pytest.mark.parametrize("control", REORDERING)
@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("pay {c}fdp.exe", "pay fdp.exe"),
        ("**bold{c}**", "*bold*"),
        ("# head{c}ing", "*heading*"),
        ("- it{c}em", "\u2022 item"),
        ("> quo{c}te", "> quote"),
        ("`co{c}de`", "`code`"),
        ("```\nif ok:{c} # comment\n```", "```\nif ok: # comment\n```"),
        ("see <https://e.com/{c}x>", "see &lt;https://e.com/x&gt;"),
        ("[la{c}bel](https://e.com)", "<https://e.com|label>"),
        ("[x](https://e.com/{c}gnp.exe)", "<https://e.com/gnp.exe|x>"),
        ("| a{c} |\n|---|\n| bb |", "```\na\n--\nbb\n```"),  # and the width is right
    ],
)
def test_reordering_controls_never_reach_slack(control: str, markdown: str, expected: str) -> None:
    assert to_mrkdwn(markdown.format(c=control)) == expected


@pytest.mark.parametrize("control", REORDERING)
def test_a_control_cannot_hide_a_broadcast_or_a_fence(control: str) -> None:
    assert to_mrkdwn(f"hey @{control}here") == f"hey @{ZWJ}here"
    assert to_mrkdwn(f"a ``{control}` b") == f"a ``{ZWSP}` b"


def test_controls_in_a_long_answer_are_gone_from_every_message() -> None:
    line = "\u202eword \u2067word\u2069 "
    chunks = format_answer(line * 2000)
    assert len(chunks) > 1
    assert all(no_reordering(chunk) for chunk in chunks)
    assert "".join(chunks).replace(" ", "") == "word" * 4000


def test_escape_drops_them_for_every_caller() -> None:
    assert escape("\u202e<b> & \u2066c\u2069") == "&lt;b&gt; &amp; c"


def test_an_approval_card_shows_no_reordering_control() -> None:
    arguments = {"summary": "Refund \u202e00.001$", "description": "\u2067x\u2069 for @\u202ehere"}
    call = ToolCall(id="c1", name="jira_create_issue", arguments=json.dumps(arguments))
    turn = TurnState(channel_id="C1", user_id="U1", id=7)
    step = "Create \u202eissue"
    _fallback, blocks = approval_card(turn, [call], lambda c: step, default_project="P")
    shown = json.dumps(blocks, ensure_ascii=False)
    assert no_reordering(shown)
    assert "Refund 00.001$" in shown
    assert f"x for @{ZWJ}here" in shown


@pytest.mark.parametrize("mark", MARKS)
def test_direction_marks_stay_in_prose_and_code(mark: str) -> None:
    prose = f"\u05e9\u05dc\u05d5\u05dd 2024{mark}!"
    assert to_mrkdwn(prose) == prose
    assert to_mrkdwn(f"`{prose}`") == f"`{prose}`"
    assert split_message(prose) == [prose]


@pytest.mark.parametrize("mark", MARKS)
def test_direction_marks_cannot_hide_a_domain_in_link_text(mark: str) -> None:
    assert to_mrkdwn(f"[good{mark}.com](https://evil.com)") == "good.com (https://evil.com)"
