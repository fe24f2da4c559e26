"""``bot history list|show|export|delete|purge`` through the real entry point, on SQLite
and (with TEST_DATABASE_URL) PostgreSQL. No OpenAI key is set: history needs none."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from datetime import timedelta
from pathlib import Path

import pytest

from bot.messages import Message, Summary, ToolCall, utcnow
from bot.store.db import create_engine
from bot.store.feedback import FeedbackStore
from bot.store.history import HistoryStore
from bot.store.summaries import SummaryStore
from tests.cli.helpers import run_bot
from tests.stored_turns import add_turn

CALL = ToolCall("call_1", "jira_get_issue", '{"issue_key":"TASK-1"}')
RESULT = '{"key":"TASK-1","summary":"登録フォーム 🚀","status":"Open"}'
QUESTION = "what is TASK-1? 🎫 日本語"
SCRIPT = "<script>alert(1)</script>"


def seed(database_url: str) -> None:
    """C0123 (named): a turn with a tool call, then a failed turn holding a <script>;
    D0456: one turn from 40 days ago that hit the round cap."""

    async def run() -> None:
        store = HistoryStore(create_engine(database_url))
        try:
            await add_turn(
                store,
                "C0123",
                QUESTION,
                [
                    Message.assistant(None, (CALL,)),
                    Message.tool_result(CALL, RESULT),
                    Message.assistant("TASK-1 is open 🚀"),
                ],
            )
            await add_turn(store, "C0123", SCRIPT, outcome="error", error="model timed out")
            await store.set_channel_name("C0123", "général")
            old = utcnow() - timedelta(days=40)
            await add_turn(
                store,
                "D0456",
                "old question",
                [Message.assistant("old")],
                outcome="max_rounds",
                at=old,
            )
        finally:
            await store.engines.dispose()

    asyncio.run(run())


@pytest.fixture
def bot(database_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Seeded database; call ``bot("history", ...)`` to run the CLI against it."""
    seed(database_url)

    def run(*args: str):  # type: ignore[no-untyped-def]
        # stdin is a pipe that says "y": a prompt must still refuse, not read it
        return run_bot(*args, env={"DATABASE_URL": database_url}, cwd=tmp_path, input="y\n")

    return run


def test_list_is_an_aligned_table(bot) -> None:  # type: ignore[no-untyped-def]
    result = bot("history", "list")

    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == [
        "CHANNEL",
        "NAME",
        "MESSAGES",
        "TURNS",
        "LAST",
        "ACTIVITY",
        "FEEDBACK",
    ]
    assert rows[0].split()[:4] == ["C0123", "général", "5", "2"]  # most recent first
    assert rows[1].split()[:3] == ["D0456", "2", "1"]
    when = header.index("LAST ACTIVITY")
    turns_end = header.index("TURNS") + len("TURNS")
    for row in rows:
        assert row[when : when + 2] == "20"  # the dates start under their heading
        assert row[turns_end - 1].isdigit()  # counts are right-aligned
    assert "UTC" in rows[0]
    assert rows[0].endswith("👍 0 👎 0")  # no feedback given yet


def test_list_json_is_the_document(bot) -> None:  # type: ignore[no-untyped-def]
    result = bot("history", "list", "--json")

    assert result.returncode == 0, result.stderr
    recent, old = json.loads(result.stdout)
    assert recent["channel_id"] == "C0123" and recent["name"] == "général"
    assert (recent["messages"], recent["turns"]) == (5, 2)
    assert recent["last_activity"].endswith("Z")
    assert old == {
        "channel_id": "D0456",  # no name known: no "name" key
        "messages": 2,
        "turns": 1,
        "last_activity": old["last_activity"],
        "feedback": {"positive": 0, "negative": 0},
    }


def test_show_prints_the_transcript_with_tool_calls_and_turns(bot) -> None:  # type: ignore[no-untyped-def]
    result = bot("history", "show", "C0123")

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("Session C0123: 5 messages, 2 turns")
    assert "user  user U1" in out and QUESTION in out
    assert "calls jira_get_issue (call_1) with" in out
    assert '"issue_key": "TASK-1"' in out  # arguments, indented
    assert "result of jira_get_issue (call_1)" in out
    assert '"summary": "登録フォーム 🚀"' in out  # the result, indented
    assert "TASK-1 is open 🚀" in out
    assert SCRIPT in out  # a terminal shows it as the text it is
    assert out.index(QUESTION) < out.index("call_1") < out.index("TASK-1 is open")
    turns = out[out.index("TURN  ") :].splitlines()
    assert "answered" in turns[1] and "jira_get_issue" in turns[1] and "2345 ms" in turns[1]
    assert "error" in turns[2]


def test_show_json_is_the_interface_document(bot) -> None:  # type: ignore[no-untyped-def]
    result = bot("history", "show", "C0123", "--json")

    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["channel_id"] == "C0123"
    messages = document["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "user"]
    user, calling, tool, answer, script = messages
    assert set(user) == {"id", "role", "content", "user_id", "slack_ts", "turn_id", "created_at"}
    assert user["content"] == QUESTION
    assert calling["content"] is None
    assert calling["tool_calls"] == [CALL.to_dict()]
    assert set(calling) == {"id", "role", "content", "tool_calls", "turn_id", "created_at"}
    assert tool["tool_call_id"] == "call_1" and tool["name"] == "jira_get_issue"
    assert tool["content"] == RESULT
    assert set(answer) == {"id", "role", "content", "turn_id", "created_at"}
    assert script["content"] == SCRIPT
    assert [t["outcome"] for t in document["turns"]] == ["answered", "error"]
    assert document["turns"][1]["error"] == "model timed out"


def test_show_json_has_the_summaries_of_what_fell_out(bot, database_url: str) -> None:  # type: ignore[no-untyped-def]
    first, last = (
        m["id"]
        for m in json.loads(bot("history", "show", "C0123", "--json").stdout)["messages"][:2]
    )

    async def summarise() -> None:
        engines = create_engine(database_url)
        try:
            await SummaryStore(engines).add(Summary("C0123", "TASK-1 is open.", first, last, 9))
        finally:
            await engines.dispose()

    asyncio.run(summarise())
    document = json.loads(bot("history", "show", "C0123", "--json").stdout)

    (summary,) = document["summaries"]
    assert set(summary) == {"text", "first_message_id", "last_message_id", "created_at"}
    assert summary["text"] == "TASK-1 is open." and summary["created_at"]
    assert (summary["first_message_id"], summary["last_message_id"]) == (first, last)
    assert json.loads(bot("history", "show", "D0456", "--json").stdout)["summaries"] == []


def test_an_edited_question_says_when_it_was_edited(bot, database_url: str) -> None:  # type: ignore[no-untyped-def]
    async def edit() -> None:
        store = HistoryStore(create_engine(database_url))
        try:
            (question, *_) = await store.messages("C0123")
            assert question.slack_ts is not None
            edited = await store.edit_slack_message("C0123", question.slack_ts, "TASK-2?", 3)
            assert edited == 1
        finally:
            await store.engines.dispose()

    asyncio.run(edit())
    shown, document = bot("history", "show", "C0123"), bot("history", "show", "C0123", "--json")

    assert shown.returncode == 0 and document.returncode == 0
    (heading,) = [line for line in shown.stdout.splitlines() if line.startswith("#1 ")]
    assert "user U1  edited 20" in heading and "TASK-2?" in shown.stdout
    question, *others = json.loads(document.stdout)["messages"]
    assert question["content"] == "TASK-2?" and question["edited_at"] >= question["created_at"]
    assert not [m for m in others if "edited_at" in m]


@pytest.mark.parametrize(
    "args",
    [
        ("show", "NOPE"),
        ("show", "NOPE", "--json"),
        ("export", "--channel", "NOPE"),
        ("delete", "NOPE", "--yes"),
    ],
)
def test_an_unknown_channel_is_one_clear_line(bot, args) -> None:  # type: ignore[no-untyped-def]
    result = bot("history", *args)

    assert result.returncode == 1
    assert result.stderr == "error: no stored session for channel 'NOPE'\n"
    assert result.stdout == ""


def test_export_jsonl_to_stdout_and_to_a_file(bot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = bot("history", "export")

    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["channel_id"] for line in lines] == ["C0123"] * 5 + ["D0456"] * 2
    assert lines[1]["content"] is None and lines[1]["tool_calls"] == [CALL.to_dict()]
    assert lines[0]["content"] == QUESTION

    target = tmp_path / "out.jsonl"
    to_file = bot("history", "export", "--format", "jsonl", "--output", str(target))
    assert to_file.returncode == 0, to_file.stderr
    assert to_file.stdout == ""
    assert f"Exported 7 messages to {target}" in to_file.stderr
    assert target.read_text(encoding="utf-8") == result.stdout

    one = bot("history", "export", "--channel", "D0456")
    assert [json.loads(line)["content"] for line in one.stdout.splitlines()] == [
        "old question",
        "old",
    ]


def test_export_csv_to_stdout_and_to_a_file(bot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = bot("history", "export", "--format", "csv")

    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout, newline="")))
    assert list(rows[0]) == [
        "channel_id",
        "id",
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "name",
        "user_id",
        "slack_ts",
        "turn_id",
        "created_at",
        "edited_at",
        "channel_settings",
    ]
    assert len(rows) == 7
    assert rows[0]["content"] == QUESTION and rows[0]["user_id"] == "U1"
    assert json.loads(rows[1]["tool_calls"]) == [CALL.to_dict()] and rows[1]["content"] == ""
    assert rows[2]["content"] == RESULT and rows[2]["name"] == "jira_get_issue"
    assert rows[4]["content"] == SCRIPT

    target = tmp_path / "out.csv"
    to_file = bot("history", "export", "--format", "csv", "--output", str(target))
    assert to_file.returncode == 0, to_file.stderr
    assert target.read_bytes() == result.stdout.encode("utf-8").replace(b"\n", b"\r\n").replace(
        b"\r\r\n", b"\r\n"
    )


def test_export_turns_as_jsonl_and_as_a_second_csv(bot, tmp_path: Path, database_url: str) -> None:  # type: ignore[no-untyped-def]
    first_id = json.loads(bot("history", "show", "C0123", "--json").stdout)["turns"][0]["id"]

    async def feedback() -> None:
        engine = create_engine(database_url)
        await FeedbackStore(engine).record(first_id, "C0123", "U2", "positive")
        await engine.dispose()

    asyncio.run(feedback())
    result = bot("history", "export", "--turns")

    assert result.returncode == 0, result.stderr
    turns = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(t["channel_id"], t["outcome"]) for t in turns] == [
        ("C0123", "answered"),
        ("C0123", "error"),
        ("D0456", "max_rounds"),
    ]
    # each the turn's document of history show --json, with its channel first
    shown = json.loads(bot("history", "show", "C0123", "--json").stdout)["turns"]
    mine = [
        {k: v for k, v in t.items() if k not in ("channel_id", "channel_settings")} for t in turns
    ]
    assert mine[:2] == shown
    first = turns[0]
    assert first["rounds"] == 1 and first["tools"] == ["jira_get_issue"]
    assert (first["tokens_in"], first["tokens_out"], first["latency_ms"]) == (1500, 120, 2345)
    assert first["user_id"] == "U1" and first["model"] == "gpt-test"
    assert turns[1]["error"] == "model timed out"
    assert [(f["user_id"], f["value"]) for f in first["feedback"]] == [("U2", "positive")]

    target = tmp_path / "turns.csv"
    to_file = bot("history", "export", "--turns", "--format", "csv", "--output", str(target))
    assert to_file.returncode == 0, to_file.stderr
    assert f"Exported 3 turns to {target}" in to_file.stderr
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"), newline="")))
    assert list(rows[0]) == [
        "channel_id",
        "id",
        "slack_ts",
        "user_id",
        "started_at",
        "outcome",
        "rounds",
        "tools",
        "tokens_in",
        "tokens_out",
        "latency_ms",
        "feedback",
        "model",
        "api_mode",
        "error",
        "channel_settings",
    ]
    assert [row["outcome"] for row in rows] == ["answered", "error", "max_rounds"]
    assert json.loads(rows[0]["tools"]) == ["jira_get_issue"]
    assert (rows[0]["tokens_in"], rows[0]["latency_ms"]) == ("1500", "2345")
    assert rows[1]["tools"] == "[]" and rows[1]["error"] == "model timed out"
    assert json.loads(rows[0]["feedback"]) == first["feedback"]
    assert json.loads(rows[1]["feedback"]) == []

    one = bot("history", "export", "--turns", "--channel", "D0456")
    assert [json.loads(line)["outcome"] for line in one.stdout.splitlines()] == ["max_rounds"]


def test_delete_needs_yes_when_nobody_can_answer(bot) -> None:  # type: ignore[no-untyped-def]
    refused = bot("history", "delete", "C0123")

    assert refused.returncode == 1
    assert "refusing to delete without confirmation; add --yes" in refused.stderr
    assert bot("history", "show", "C0123").returncode == 0

    deleted = bot("history", "delete", "C0123", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "Deleted session C0123 (5 messages)."
    assert bot("history", "show", "C0123").returncode == 1
    remaining = json.loads(bot("history", "list", "--json").stdout)
    assert [s["channel_id"] for s in remaining] == ["D0456"]


def test_purge_deletes_only_what_is_older(bot) -> None:  # type: ignore[no-untyped-def]
    refused = bot("history", "purge", "--older-than", "30")
    assert refused.returncode == 1
    assert "add --yes" in refused.stderr

    purged = bot("history", "purge", "--older-than", "30", "--yes")

    assert purged.returncode == 0, purged.stderr
    assert purged.stdout.startswith("Purged 2 messages created before ")
    remaining = json.loads(bot("history", "list", "--json").stdout)
    assert [(s["channel_id"], s["messages"], s["turns"]) for s in remaining] == [("C0123", 5, 2)]


def test_purge_rejects_a_bad_age(bot) -> None:  # type: ignore[no-untyped-def]
    result = bot("history", "purge", "--older-than", "0", "--yes")

    assert result.returncode == 2
    assert "--older-than" in result.stderr


def test_an_empty_database_says_so(tmp_path: Path, sqlite_url: str) -> None:
    env = {"DATABASE_URL": sqlite_url}
    result = run_bot("history", "list", env=env, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "No stored sessions.\n"
    as_json = run_bot("history", "list", "--json", env=env, cwd=tmp_path)
    assert json.loads(as_json.stdout) == []


def test_a_bad_database_url_is_a_settings_error(tmp_path: Path) -> None:
    result = run_bot("history", "list", env={"DATABASE_URL": "mysql://x"}, cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr.startswith("error: DATABASE_URL is invalid")
