"""Settings errors and ``bot --version`` through the real entry point."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

from tests.cli.helpers import one_line, run_bot


def test_version_is_the_package_s(tmp_path: Path) -> None:
    result = run_bot("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == f"bot {version('bot')}"


def test_run_names_every_missing_setting_and_the_two_ways_in(tmp_path: Path) -> None:
    result = run_bot("run", cwd=tmp_path)

    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith(
        "error: SLACK_BOT_TOKEN, OPENAI_API_KEY and either SLACK_APP_TOKEN or "
        "SLACK_SIGNING_SECRET are not set: "
    )
    assert "Socket Mode (the manifest's default)" in line and "`bot run --http`" in line
    assert not (tmp_path / "bot.db").exists()


def test_run_with_one_way_in_asks_for_the_rest_only(tmp_path: Path) -> None:
    result = run_bot("run", cwd=tmp_path, env={"SLACK_APP_TOKEN": "xapp-1", "OPENAI_API_KEY": "k"})
    assert result.returncode == 2
    assert one_line(result.stderr).startswith("error: SLACK_BOT_TOKEN is not set: put the bot")


def test_run_http_without_a_signing_secret_says_so(tmp_path: Path) -> None:
    env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}
    result = run_bot("run", "--http", cwd=tmp_path, env=env)
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith("error: OPENAI_API_KEY and SLACK_SIGNING_SECRET are not set: ")
    assert "signing secret from your Slack app's Basic Information page" in line


def test_every_malformed_setting_is_named_in_one_line(tmp_path: Path) -> None:
    env = {"MAX_TOOL_ROUNDS": "lots", "LLM_API": "completions", "HOST": "not a host"}
    result = run_bot("run", cwd=tmp_path, env=env)

    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith("error: LLM_API, MAX_TOOL_ROUNDS and HOST are invalid: ")
    for hint in ("chat or responses", "a whole number from 1 to 50", "0.0.0.0 (every interface)"):
        assert hint in line


def test_comma_lists_come_from_the_environment_and_dotenv(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    assert run_bot("db", "upgrade", cwd=tmp_path, env={"DATABASE_URL": url}).returncode == 0
    env = {"DATABASE_URL": url, "ADMIN_SLACK_USERS": "U1, U2"}
    (tmp_path / ".env").write_text("JIRA_ALLOWED_PROJECTS=TASK,OPS\n")

    result = run_bot("history", "list", cwd=tmp_path, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "No stored sessions.\n"


def test_malformed_default_headers_are_one_line(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "k", "OPENAI_DEFAULT_HEADERS": "X-Team: ops"}
    result = run_bot("ask", "--channel", "C1", "hi", cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert one_line(result.stderr) == (
        "error: OPENAI_DEFAULT_HEADERS is invalid (not valid JSON): put a JSON object of header "
        'names and values, e.g. {"X-Team": "ops"} in it.'
    )


def test_a_short_admin_token_stops_the_bot_in_one_line(tmp_path: Path) -> None:
    env = {"ADMIN_TOKEN": "s3cret-admin-token", "SLACK_APP_TOKEN": "xapp-1"}
    result = run_bot("run", cwd=tmp_path, env=env)

    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith("error: ADMIN_TOKEN is invalid (shorter than 32 characters): put ")
    assert "openssl rand -hex 32" in line and "s3cret" not in line
    assert not (tmp_path / "bot.db").exists()


def test_a_malformed_long_answer_limit_is_one_line(tmp_path: Path) -> None:
    for value in ("three", "-1"):
        env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "OPENAI_API_KEY": "k"}
        result = run_bot("run", cwd=tmp_path, env={**env, "LONG_ANSWER_MESSAGES": value})

        assert result.returncode == 2
        line = one_line(result.stderr)
        assert line.startswith("error: LONG_ANSWER_MESSAGES is invalid (")
        assert "a whole number of messages, e.g. 3 (0: never a file)" in line
