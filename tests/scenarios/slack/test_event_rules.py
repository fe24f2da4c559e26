"""The pure rules of bot.slack.events: what is a question, where its answer goes, what is
ignored."""

from __future__ import annotations

from typing import Any

import pytest

from bot.agent.conversations import Incoming
from bot.slack.cards import FEEDBACK, PRESSES
from bot.slack.events import (
    ChannelGone,
    Deletion,
    Edit,
    Question,
    change_from,
    change_of,
    deleted_message,
    edited_message,
    is_ignored,
    question_from,
    strip_mention,
    understood,
)
from bot.slack.presses import Press, press_from

BOT = "UBOT"


def ignored(event: dict[str, Any], bot_user_id: str) -> bool:
    return is_ignored(event, understood(event, bot_user_id))


def event(**fields: Any) -> dict[str, Any]:
    return {"type": "message", "channel": "C1", "user": "U1", "ts": "1.000100", **fields}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<@UBOT> hi", "hi"),
        ("hi <@UBOT>", "hi"),
        ("ask <@UBOT|bot> about <@U2>", "ask about <@U2>"),
        ("<@UBOT>", ""),
        ("line one\n<@UBOT> line two", "line one\n line two"),
    ],
)
def test_the_bots_own_mention_is_stripped(text: str, expected: str) -> None:
    assert strip_mention(text, BOT) == expected


def test_a_mention_is_answered_in_its_thread_or_starts_one() -> None:
    top = question_from(event(type="app_mention", text="<@UBOT> hi"), BOT)
    threaded = question_from(event(type="app_mention", text="<@UBOT> hi", thread_ts="0.5"), BOT)

    assert top is not None and top.incoming == Incoming("C1", "hi", "U1", "1.000100")
    assert top.thread_ts == "1.000100"
    assert threaded is not None and threaded.thread_ts == "0.5"


def test_a_dm_is_answered_at_the_top_level_unless_asked_in_a_thread() -> None:
    top = question_from(event(channel="D1", channel_type="im", text="hi"), BOT)
    threaded = question_from(event(channel="D1", channel_type="im", text="x", thread_ts="0.5"), BOT)

    assert top is not None and top.thread_ts is None and top.incoming.text == "hi"
    assert threaded is not None and threaded.thread_ts == "0.5"
    # a threaded DM is the assistant pane's, as Bolt's Assistant routes it
    assert (top.pane, threaded.pane) == (False, True)


def test_a_question_kept_with_its_claim_comes_back_the_same() -> None:
    asked = [
        question_from(event(type="app_mention", text="<@UBOT> hi", thread_ts="0.5"), BOT),
        question_from(event(channel="D1", channel_type="im", text="x", thread_ts="0.5"), BOT),
        question_from(event(channel="D1", channel_type="im", text="top"), BOT),
    ]

    assert [Question.from_dict(q.to_dict()) for q in asked if q is not None] == asked


@pytest.mark.parametrize(
    "fields",
    [
        {"channel_type": "channel", "text": "no mention here"},
        {"channel_type": "im", "text": "hi", "bot_id": "B9"},
        {"channel_type": "im", "text": "hi", "subtype": "bot_message"},
        {"channel_type": "im", "text": "hi", "user": BOT},
        {"channel_type": "im", "text": "hi", "subtype": "message_changed"},
        {"channel_type": "im", "text": "hi", "subtype": "thread_broadcast"},
        {"channel_type": "im", "text": "hi", "user": None},
        {"type": "app_mention", "text": "<@UBOT> hi", "bot_id": "B9"},
    ],
)
def test_ignored_messages(fields: dict[str, Any]) -> None:
    assert question_from(event(**fields), BOT) is None
    assert ignored(event(**fields), BOT)


def test_a_file_share_and_a_channel_message_mentioning_the_bot_are_questions() -> None:
    shared = event(channel_type="im", subtype="file_share", text="see file")
    mentioned = event(channel_type="channel", text="<@UBOT> hi")

    assert question_from(shared, BOT) is not None and not ignored(shared, BOT)
    assert question_from(mentioned, BOT) is not None


def test_a_deletion_names_the_deleted_message_and_is_not_ignored() -> None:
    deleted = event(subtype="message_deleted", deleted_ts="0.9", ts="2.0", user=None)

    assert deleted_message(deleted, BOT) == Deletion("C1", "0.9", "2.0")
    assert not ignored(deleted, BOT)
    assert deleted_message(event(text="hi"), BOT) is None


@pytest.mark.parametrize("author", [{"user": BOT}, {"bot_id": "B9", "subtype": "bot_message"}])
def test_the_deletion_of_a_bots_message_is_ignored(author: dict[str, str]) -> None:
    """The bot deletes its step message every turn; Slack tells it so."""
    previous = {"type": "message", "text": "_Looking up TASK-1…_", "ts": "0.9", **author}
    deleted = event(
        subtype="message_deleted", deleted_ts="0.9", ts="2.0", user=None, previous_message=previous
    )

    assert deleted_message(deleted, BOT) is None and ignored(deleted, BOT)


def edit(before: str | None, after: str, **fields: Any) -> dict[str, Any]:
    """A ``message_changed`` event: the message of U1 at 1.000100 now reads ``after``."""
    message = {"type": "message", "user": "U1", "text": after, "ts": "1.000100"}
    previous = {**message, "text": before} if before is not None else None
    changed = {"type": "message", "user": None, "subtype": "message_changed", "ts": "2.0"}
    return event(**changed, message=message, previous_message=previous, **fields)


def test_an_edit_of_a_question_is_followed_with_its_new_text() -> None:
    in_channel = edit("<@UBOT> what is TASK-1?", "<@UBOT> what is TASK-2?", event_ts="2.0")
    in_dm = edit("hi", "hello", channel="D1", channel_type="im")
    mention_removed = edit("<@UBOT> hi", "hi")

    assert edited_message(in_channel, BOT) == Edit("C1", "1.000100", "what is TASK-2?", "2.0")
    assert edited_message(in_dm, BOT) == Edit("D1", "1.000100", "hello", "2.0")
    assert edited_message(mention_removed, BOT) == Edit("C1", "1.000100", "hi", "2.0")
    assert not ignored(in_channel, BOT) and question_from(in_channel, BOT) is None


def test_an_edited_question_keeps_its_files_references() -> None:
    changed = edit("see this", "see this one", channel="D1", channel_type="im")
    file = {"id": "F1", "name": "a.png", "mimetype": "image/png", "size": 1234}
    changed["message"]["files"] = [file]

    assert edited_message(changed, BOT) == Edit(
        "D1",
        "1.000100",
        "see this one\n[attached file 'a.png': image/png, 1,234 bytes, id F1]",
        "2.0",
    )


@pytest.mark.parametrize(
    "changed",
    [
        edit("just chatting", "just chatting, edited"),  # never a question here
        edit("<@UBOT> see https://x.io", "<@UBOT> see https://x.io"),  # a preview added
        edit("<@UBOT> hi", "<@UBOT> hello") | {"message": {"text": "hello", "ts": "1.1"}},
        edit(None, "<@UBOT> hi") | {"message": {"bot_id": "B1", "text": "x", "ts": "1.1"}},
        edit("<@UBOT> a", "<@UBOT> b") | {"message": {"user": BOT, "text": "b", "ts": "1.1"}},
    ],
    ids=["not a question", "text unchanged", "no author", "a bot's", "the bot's own"],
)
def test_edits_that_cannot_touch_a_stored_question_are_ignored(changed: dict[str, Any]) -> None:
    assert edited_message(changed, BOT) is None
    assert ignored(changed, BOT)


def test_other_events_are_none_of_the_bots_business_here() -> None:
    reaction = {"type": "reaction_added", "user": "U1"}
    assert question_from(reaction, BOT) is None and not ignored(reaction, BOT)


@pytest.mark.parametrize(
    ("fields", "external"),
    [
        ({}, False),  # Slack names no workspace: the bot's own
        ({"user_team": "T1", "team": "T1"}, False),
        ({"user_team": "T2", "source_team": "T2", "team": "T2"}, True),
        ({"team": "T2"}, True),  # an older event names it in team only
        ({"user_team": {"id": "T2"}}, False),  # not what Slack sends: not trusted as a name
    ],
)
def test_a_person_of_another_workspace_is_told_apart(
    fields: dict[str, Any], external: bool
) -> None:
    asked = question_from(event(type="app_mention", text="<@UBOT> hi", **fields), BOT, "T1")
    assert asked is not None and asked.external is external
    # and the claim keeps it, for whoever answers it
    assert Question.from_dict(asked.to_dict()).external is external


def test_a_deleted_channel_is_a_change_placed_after_what_was_sent_before() -> None:
    gone = change_from({"type": "channel_deleted", "channel": "C1"}, BOT, 1_700_000_000)
    assert isinstance(gone, ChannelGone) and gone.key == "1700000000.999999"
    assert change_of(gone.job("Ev1").payload) == gone
    private = change_from({"type": "group_deleted", "channel": "G1"}, BOT, 1_700_000_000)
    assert isinstance(private, ChannelGone) and private.channel == "G1"
    # without a channel, or a time to place it by, there is nothing to do
    assert change_from({"type": "channel_deleted"}, BOT, 1_700_000_000) is None
    assert change_from({"type": "channel_deleted", "channel": "C1"}, BOT, "soon") is None


def test_a_questions_files_are_kept_as_references_and_come_back_the_same() -> None:
    files = [
        {"id": "F1", "name": "a.png", "mimetype": "image/png", "size": 10, "url_private": "u"},
        {"id": "F2", "title": "notes", "file_access": "check_file_info"},  # no URL: files.info
        {"name": "no id"},
        "not a file",
    ]
    shared = question_from(event(channel_type="im", subtype="file_share", files=files), BOT)

    assert shared is not None
    assert shared.files == (
        {
            "id": "F1",
            "name": "a.png",
            "mimetype": "image/png",
            "filetype": "",
            "size": 10,
            "url": "u",
        },
        {
            "id": "F2",
            "name": "notes",
            "mimetype": "application/octet-stream",
            "filetype": "",
            "size": None,
            "url": None,
        },
    )
    assert Question.from_dict(shared.to_dict()) == shared
    older = {k: v for k, v in shared.to_dict().items() if k != "files"}  # queued before files
    assert Question.from_dict(older).files == ()


def feedback_press(value: str, **container: Any) -> dict[str, Any]:
    return {
        "actions": [{"action_id": FEEDBACK, "value": value, "action_ts": "1700000001.000200"}],
        "container": {"channel_id": "C1", **container},
        "user": {"id": "U2"},
    }


def test_a_feedback_press_names_its_verdict_and_turn() -> None:
    press = press_from(feedback_press("negative:42", thread_ts="1700000000.000100"), PRESSES)

    assert press == Press(
        FEEDBACK,
        42,
        "U2",
        "C1",
        "1700000001.000200",
        verdict="negative",
        thread_ts="1700000000.000100",
    )
    assert Press.from_dict(press.job().payload) == press


@pytest.mark.parametrize(
    ("value", "container"),
    [
        ("maybe:42", {}),
        ("positive:", {}),
        ("positive:4x", {}),
        ("42", {}),
        ("positive:" + "9" * 19, {}),
        ("positive:42", {"thread_ts": "1.2\n"}),
    ],
)
def test_a_malformed_feedback_press_is_refused(value: str, container: dict[str, str]) -> None:
    assert press_from(feedback_press(value, **container), PRESSES) is None
