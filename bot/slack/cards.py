"""The bot's messages with buttons, built from a stored turn; no I/O.

* The approval card: what a paused turn is about to do (each writing call's change in
  words as its heading, then its arguments: issue, project, summary, comment, assignee,
  status, ..., for whom) with Create (Go ahead for a write other than a new Jira ticket)
  and Cancel.
* The Continue button under an answer that hit the round cap.
* The feedback buttons (thumbs up and down, Slack's ``feedback_buttons``) under an answer.

Each button's value is the turn's id (a feedback button's: the verdict and the turn's id);
whatever the arguments say is escaped, so model text cannot ping anyone or disguise a link
on the card.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from slack_sdk.models.blocks import (
    ContextActionsBlock,
    FeedbackButtonObject,
    FeedbackButtonsElement,
)

from bot.messages import NEGATIVE, POSITIVE, ToolCall
from bot.slack.format import escape, neutralise_mentions
from bot.turn import TurnState

APPROVE = "approve_write"
DECLINE = "decline_write"
CONTINUE = "continue_turn"
FEEDBACK = "answer_feedback"
#: every button of the bot's: a press of one is a job (see bot.slack.app)
PRESSES = frozenset({APPROVE, DECLINE, CONTINUE, FEEDBACK})

#: labels of the arguments a card shows first, in this order; others follow by name
LABELS = {
    "issue_key": "Issue",
    "project_key": "Project",
    "issue_type": "Type",
    "summary": "Summary",
    "description": "Description",
    "priority": "Priority",
    "labels": "Labels",
    "due_date": "Due date",
    "assignee": "Assignee",
    "status": "Status",
    "link_type": "Link",
    "other_issue_key": "Other issue",
    "body": "Comment",
    "comment": "Comment",
}
FIELD_MAX = 1_900  # Slack allows 2,000 characters in a section field
DEFAULTS = {"issue_type": "Task"}

Blocks = list[dict[str, Any]]
Describe = Callable[[ToolCall], str]


def approval_card(
    turn: TurnState,
    calls: list[ToolCall],
    describe: Describe,
    *,
    default_project: str | None,
    decided: str | None = None,
) -> tuple[str, Blocks]:
    """(fallback text, blocks) of the card; ``decided`` (who decided, or that it expired)
    replaces the buttons."""
    # the change each call would make, as read when the turn paused, else what it does
    steps = [call.preview or describe(call) for call in calls]
    text = "Approval needed: " + "; ".join(_safe(step) for step in steps)
    blocks: Blocks = [_section("*I'd like to do this. Shall I go ahead?*")]
    for call, step in zip(calls, steps, strict=True):
        fields = _fields(call, turn.user_id, default_project)
        blocks.append({"type": "section", "text": _mrkdwn(f"*{_safe(step)}*"), "fields": fields})
    if decided is not None:
        blocks.append({"type": "context", "elements": [_mrkdwn(decided)]})
        return f"{text} ({decided})", blocks
    # "Create" where every write makes a Jira ticket; any other write (an MCP tool's)
    # says what the button does without claiming it creates something
    go = "Create" if all(call.name == "jira_create_issue" for call in calls) else "Go ahead"
    blocks.append(
        {
            "type": "actions",
            "elements": [
                _button(APPROVE, go, turn, style="primary"),
                _button(DECLINE, "Cancel", turn),
            ],
        }
    )
    return text, blocks


def continue_message(turn_id: int, rounds: int) -> tuple[str, Blocks]:
    text = f"I stopped after {rounds} rounds of tool calls. Shall I keep going?"
    button = {
        "type": "button",
        "action_id": CONTINUE,
        "text": {"type": "plain_text", "text": "Continue"},
        "value": str(turn_id),
    }
    return text, [_section(text), {"type": "actions", "elements": [button]}]


def feedback_block(turn_id: int) -> dict[str, Any]:
    """Thumbs up and down under an answer; a press says which, and of which turn."""
    buttons = FeedbackButtonsElement(
        action_id=FEEDBACK,
        positive_button=FeedbackButtonObject(
            text="Good answer",
            accessibility_label="Tell the bot this answer was good",
            value=f"{POSITIVE}:{turn_id}",
        ),
        negative_button=FeedbackButtonObject(
            text="Bad answer",
            accessibility_label="Tell the bot this answer was not good",
            value=f"{NEGATIVE}:{turn_id}",
        ),
    )
    return ContextActionsBlock(elements=[buttons]).to_dict()


def _fields(call: ToolCall, requester: str | None, default_project: str | None) -> Blocks:
    try:
        parsed = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        parsed = {}
    arguments: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    if call.name == "jira_create_issue":  # what Jira will use when the model names none
        arguments = {**DEFAULTS, "project_key": default_project or "(default)", **arguments}
    ordered = [k for k in LABELS if k in arguments] + [k for k in arguments if k not in LABELS]
    fields = [_field(LABELS.get(k, k), arguments[k]) for k in ordered[:9]]
    if requester:
        fields.append(_mrkdwn(f"*For*\n<@{requester}>"))
    return fields


def _field(label: str, value: Any) -> dict[str, str]:
    shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    shown = shown if len(shown) <= FIELD_MAX else shown[:FIELD_MAX] + "…"
    return _mrkdwn(f"*{_safe(label)}*\n{_safe(shown) or '-'}")


def _button(action: str, label: str, turn: TurnState, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action,
        "text": {"type": "plain_text", "text": label},
        "value": str(turn.id),
    }
    if style:
        button["style"] = style
    return button


def _safe(text: str) -> str:
    return neutralise_mentions(escape(text))


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _mrkdwn(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": text}
