"""``bot ask``, ``bot chat`` and ``bot db`` through the real entry point."""

from __future__ import annotations

import asyncio
import json

import pytest

from bot.store.db import create_engine
from bot.store.history import HistoryStore
from bot.store.migrate import alembic_config
from tests.cli.helpers import run_bot
from tests.fakes.openai_server import FakeOpenAI, ToolUse


def model_env(fake: FakeOpenAI, database_url: str, **extra: str) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": fake.base_url,
        "DATABASE_URL": database_url,
        **extra,
    }


def stored(database_url: str, channel: str):  # type: ignore[no-untyped-def]
    async def read():  # type: ignore[no-untyped-def]
        store = HistoryStore(create_engine(database_url))
        try:
            return await store.messages(channel), await store.turns(channel)
        finally:
            await store.engines.dispose()

    return asyncio.run(read())


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_ask_runs_a_tool_round_and_remembers(
    database_url: str, fake_openai: FakeOpenAI, tmp_path, api: str
) -> None:
    env = model_env(fake_openai, database_url, LLM_API=api)
    fake_openai.script(ToolUse("get_current_time", {"timezone": "UTC"}), "It is Monday.")

    first = run_bot("ask", "--channel", "C9", "what", "day", "is", "it?", env=env, cwd=tmp_path)

    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "It is Monday."
    fake_openai.script("You asked what day it is.")
    second = run_bot("ask", "--channel", "C9", "what did I ask?", env=env, cwd=tmp_path)
    assert second.stdout.strip() == "You asked what day it is."
    assert "what day is it?" in json.dumps(fake_openai.requests[-1].body)
    messages, turns = stored(database_url, "C9")
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert [t.outcome for t in turns] == ["answered", "answered"]
    assert [t.rounds for t in turns] == [1, 0]


def test_chat_is_a_terminal_conversation(
    sqlite_url: str, fake_openai: FakeOpenAI, tmp_path
) -> None:
    fake_openai.script("Hi!", "Bye!")
    result = run_bot(
        "chat",
        env=model_env(fake_openai, sqlite_url),
        cwd=tmp_path,
        input="hello\n\ngoodbye\nexit\n",
    )
    assert result.returncode == 0, result.stderr
    assert "bot> Hi!" in result.stdout and "bot> Bye!" in result.stdout
    messages, _ = stored(sqlite_url, "local")
    assert [m.content for m in messages] == ["hello", "Hi!", "goodbye", "Bye!"]


def test_ask_reports_a_failing_model_in_one_line(
    sqlite_url: str, fake_openai: FakeOpenAI, tmp_path
) -> None:
    from tests.fakes.openai_server import Fail

    fake_openai.responder = lambda request: Fail(401, "Incorrect API key provided: sk-...xyz")
    result = run_bot(
        "ask", "--channel", "C1", "hi", env=model_env(fake_openai, sqlite_url), cwd=tmp_path
    )
    assert result.returncode == 1
    # warnings for the operator may come first; the user's line is the last one
    assert result.stderr.strip().splitlines()[-1] == (
        "error: The bot cannot use its model (the server refused its credentials). "
        "Please tell an admin."
    )
    assert "sk-" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"DATABASE_URL": "mysql://localhost/x", "OPENAI_API_KEY": "k"}, "DATABASE_URL"),
        ({}, "OPENAI_API_KEY"),
        ({"OPENAI_API_KEY": "k", "MAX_TOOL_ROUNDS": "lots"}, "MAX_TOOL_ROUNDS"),
        ({"OPENAI_API_KEY": "k", "LLM_API": "completions"}, "LLM_API"),
        ({"OPENAI_API_KEY": "k", "WRITE_APPROVAL": "maybe"}, "WRITE_APPROVAL"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(tmp_path, env: dict[str, str], variable: str) -> None:
    result = run_bot("ask", "--channel", "C1", "hi", env=env, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {variable} ")
    assert "Traceback" not in result.stderr


def test_settings_come_from_dotenv(tmp_path) -> None:
    (tmp_path / ".env").write_text("MAX_TOOL_ROUNDS=zero\nOPENAI_API_KEY=k\n")
    result = run_bot("ask", "--channel", "C1", "hi", cwd=tmp_path)
    assert result.returncode == 2 and "MAX_TOOL_ROUNDS" in result.stderr


def test_unreachable_database_is_one_line(tmp_path) -> None:
    result = run_bot(
        "ask",
        "--channel",
        "C1",
        "hi",
        cwd=tmp_path,
        env={"OPENAI_API_KEY": "k", "DATABASE_URL": "postgresql://bot:hunter2@127.0.0.1:9/bot"},
    )
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot use the database") and "hunter2" not in line


def test_db_upgrade_and_current(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    (tmp_path / "fresh.db").touch()  # an empty file: SQLite's empty database
    before = run_bot("db", "current", env={"DATABASE_URL": url}, cwd=tmp_path)
    assert before.returncode == 0 and "none" in before.stdout
    upgraded = run_bot("db", "upgrade", env={"DATABASE_URL": url}, cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    after = run_bot("db", "current", env={"DATABASE_URL": url}, cwd=tmp_path)
    assert "(head)" in after.stdout


def test_migrations_go_down_and_up_again(database_url: str) -> None:
    from alembic import command

    config = alembic_config(database_url)
    command.downgrade(config, "base")
    command.upgrade(config, "head")
    messages, _ = stored(database_url, "C1")
    assert messages == []


def test_migrations_build_the_schema_the_models_describe(database_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from bot.store.models import Base

    async def differences() -> list:
        engine = create_engine(database_url)
        try:
            async with engine.connect() as connection:
                return await connection.run_sync(
                    lambda sync: compare_metadata(MigrationContext.configure(sync), Base.metadata)
                )
        finally:
            await engine.dispose()

    assert asyncio.run(differences()) == []


def test_python_dash_m_and_help(tmp_path) -> None:
    result = run_bot("--help", cwd=tmp_path)
    assert result.returncode == 0
    for command in ("ask", "chat", "db"):
        assert command in result.stdout
    assert run_bot("nonsense", cwd=tmp_path).returncode == 2
