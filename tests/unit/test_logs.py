"""Log lines as an operator's collector reads them: JSON objects with UTC times and the ids
of the work in hand, or text lines with the ids appended."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from bot.logs import configure_logging, log_context, report_error

log = logging.getLogger("bot.test")
ISO_UTC_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    # configure_logging replaces the root's handlers; pytest's own come back each phase
    root = logging.getLogger()
    level = root.level
    yield
    for handler in root.handlers[:]:
        if type(handler).__module__ == "bot.logs":
            root.removeHandler(handler)
    root.setLevel(level)


def json_lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines()]


def test_a_json_line_has_time_level_logger_message_and_ids(capsys) -> None:  # type: ignore[no-untyped-def]
    configure_logging("INFO", "json")
    with log_context(channel="C0123", turn_id=7, event_id="Ev01"):
        log.info("turn %s answered", 7)

    (line,) = json_lines(capsys.readouterr().err)
    assert line == {
        "time": line["time"],
        "level": "INFO",
        "logger": "bot.test",
        "message": "turn 7 answered",
        "channel": "C0123",
        "turn_id": 7,
        "event_id": "Ev01",
    }
    assert ISO_UTC_MS.match(str(line["time"]))
    logged = datetime.fromisoformat(str(line["time"]).replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - logged).total_seconds()) < 60


def test_an_exception_is_in_the_line_and_ids_are_absent_outside_a_context(capsys) -> None:  # type: ignore[no-untyped-def]
    configure_logging("INFO", "json")
    try:
        raise KeyError("missing")
    except KeyError:
        log.exception("lookup failed")

    (line,) = json_lines(capsys.readouterr().err)
    assert line["level"] == "ERROR" and line["message"] == "lookup failed"
    assert "KeyError: 'missing'" in str(line["exception"])
    assert not {"channel", "turn_id", "event_id"} & set(line)


async def test_contexts_nest_restore_and_reach_the_tasks_started_inside(capsys) -> None:  # type: ignore[no-untyped-def]
    configure_logging("INFO", "json")

    async def in_a_task() -> None:
        log.info("from a task")

    with log_context(channel="C1"):
        with log_context(turn_id=3):
            await asyncio.create_task(in_a_task())
        log.info("turn done")
    log.info("outside")

    lines = json_lines(capsys.readouterr().err)
    assert [(x.get("channel"), x.get("turn_id")) for x in lines] == [
        ("C1", 3),
        ("C1", None),
        (None, None),
    ]


def test_log_context_names_only_the_known_ids() -> None:
    with pytest.raises(TypeError, match="user"), log_context(user="U1"):
        pass


def test_text_lines_append_the_ids(capsys) -> None:  # type: ignore[no-untyped-def]
    configure_logging("INFO", "text")
    with log_context(channel="C9", event_id="Ev9"):
        log.warning("slow answer")
    log.warning("no ids")

    first, second = capsys.readouterr().err.splitlines()
    assert first.endswith("WARNING bot.test: slow answer [channel=C9 event_id=Ev9]")
    assert second.endswith("WARNING bot.test: no ids")


def test_the_error_line_follows_the_log_format(capsys) -> None:  # type: ignore[no-untyped-def]
    configure_logging("WARNING", "text")
    report_error("the database is gone")
    assert capsys.readouterr().err == "error: the database is gone\n"

    configure_logging("WARNING", "json")
    report_error("the database is gone")
    (line,) = json_lines(capsys.readouterr().err)
    assert (line["level"], line["logger"], line["message"]) == (
        "ERROR",
        "bot",
        "the database is gone",
    )
