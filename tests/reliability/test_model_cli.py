"""Model faults through ``bot ask`` (the real entry point in a subprocess).

The fault injected -> what the person reads (and the exit status) -> what is stored.
"""

from __future__ import annotations

from tests.cli.helpers import run_bot
from tests.fakes.openai_server import Fail, FakeOpenAI, Raw
from tests.reliability.helpers import bot_env, stored


def test_server_error_on_every_attempt(
    database_url: str, fake_openai: FakeOpenAI, tmp_path
) -> None:
    """HTTP 500 on the first try and on both SDK retries -> exit 1 and one plain line
    saying to try again (no traceback, no URL) -> the user's message is stored, no
    assistant message, the turn is ``error``."""
    fake_openai.responder = lambda request: Fail(500)
    result = run_bot(
        "ask", "--channel", "CM", "hello?", env=bot_env(fake_openai, database_url), cwd=tmp_path
    )
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == "error: The model server had an error. Please try again in a minute."
    assert "Traceback" not in result.stderr and fake_openai.url not in result.stderr
    assert len(fake_openai.requests) == 3  # the SDK's two retries, then the user is told
    messages, turns = stored(database_url, "CM")
    assert [(m.role, m.content) for m in messages] == [("user", "hello?")]
    (turn,) = turns
    assert turn.outcome == "error" and turn.error and turn.error.startswith("server")


def test_a_reply_without_choices(database_url: str, fake_openai: FakeOpenAI, tmp_path) -> None:
    """HTTP 200 ``{}`` from the server -> exit 1 and one plain line, no traceback -> the
    question is stored, the turn is an error."""
    fake_openai.responder = lambda request: Raw({})
    env = bot_env(fake_openai, database_url)
    result = run_bot("ask", "--channel", "CM", "hello?", env=env, cwd=tmp_path)

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: The model server sent a reply the bot cannot read. Please try again; if it "
        "keeps happening, tell an admin."
    )
    assert "Traceback" not in result.stderr
    messages, (turn,) = stored(database_url, "CM")
    assert [m.role for m in messages] == ["user"] and turn.outcome == "error"


def test_responses_mode_against_a_chat_only_server(
    sqlite_url: str, fake_openai: FakeOpenAI, tmp_path
) -> None:
    fake_openai.apis = {"chat"}
    env = bot_env(fake_openai, sqlite_url, LLM_API="responses")
    result = run_bot("ask", "--channel", "CM", "hello?", env=env, cwd=tmp_path)

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: The model server does not offer the Responses API. Please tell an admin to "
        "set LLM_API=chat."
    )
