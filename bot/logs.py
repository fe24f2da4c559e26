"""Logging set-up: text for people, one JSON object a line for machines, and the ids of what
is being worked on (channel, turn, Slack event) on every line logged while working on it.

    with log_context(channel="C0123", event_id="Ev01", turn_id=None):
        ...  # every record logged here, and in the tasks started here, carries both ids
        add_log_ids(turn_id=7)  # and from here on the turn's id, until the block ends

A JSON line: ``{"time": "2026-12-01T10:00:00.123Z", "level": "INFO", "logger": "bot.x",
"message": "...", "channel": "C0123", "event_id": "Ev01"}`` plus ``exception`` when there is
one and whatever a caller passed as ``extra=``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TextIO

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as _KeptJsonFormatter

#: the ids log_context sets, in the order they are shown
IDS = ("channel", "turn_id", "event_id")
_CURRENT: dict[str, ContextVar[object]] = {name: ContextVar(f"log_{name}") for name in IDS}

#: loggers whose INFO lines carry request bodies and URLs: DEBUG only for them
_NOISY = ("httpx", "httpx2", "openai", "slack_bolt", "slack_sdk", "urllib3", "aiosqlite")


@contextlib.contextmanager
def log_context(**ids: object) -> Iterator[None]:
    """Put ``ids`` (of IDS; None clears one) on every record logged within, then restore
    what was there before."""
    unknown = sorted(set(ids) - set(IDS))
    if unknown:
        raise TypeError(f"log_context takes {', '.join(IDS)}, not {', '.join(unknown)}")
    tokens = [(_CURRENT[name], _CURRENT[name].set(value)) for name, value in ids.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def add_log_ids(**ids: object) -> None:
    """Put ``ids`` on every record logged from here on, until the enclosing log_context
    that named them ends, or else the task (an id known only part-way, like a turn's once
    it is stored; or a task's own, set at its start)."""
    for name, value in ids.items():
        _CURRENT[name].set(value)


def current_log_id(name: str) -> object:
    """The id ``name`` the current log_context puts on records, or None."""
    return _CURRENT[name].get(None)


class ContextIds(logging.Filter):
    """Copies the ids of the current log_context onto each record (an ``extra=`` id wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in _CURRENT.items():
            value = var.get(None)
            if value is not None and getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


def utc_time(created: float) -> str:
    """``2026-12-01T10:00:00.123Z``"""
    moment = datetime.fromtimestamp(created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(_KeptJsonFormatter):
    """One JSON object a line: time (UTC, ms), level, logger, message, exception, ids."""

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={
                "asctime": "time",
                "levelname": "level",
                "name": "logger",
                "exc_info": "exception",
            },
            # uvicorn's records carry a coloured copy of their message
            reserved_attrs=[*RESERVED_ATTRS, "color_message", "taskName"],
            json_ensure_ascii=False,
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return utc_time(record.created)


class TextFormatter(logging.Formatter):
    """``TIME LEVEL LOGGER: message [channel=C0123 turn_id=7]``"""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        ids = [f"{n}={v}" for n in IDS if (v := getattr(record, n, None)) is not None]
        return f"{line} [{' '.join(ids)}]" if ids else line


class _Handler(logging.StreamHandler[TextIO]):
    """The handler configure_logging installs (so report_error can find it)."""


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    handler = _Handler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ContextIds())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def logs_configured() -> bool:
    return any(isinstance(h, _Handler) for h in logging.getLogger().handlers)


def report_error(text: str) -> None:
    """The line a failed command ends with, on stderr: ``error: TEXT``; with JSON logs, a
    JSON line of level ERROR, so that a log collector can read every line."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, _Handler) and isinstance(handler.formatter, JsonFormatter):
            handler.handle(logging.LogRecord("bot", logging.ERROR, "", 0, text, None, None))
            return
    sys.stderr.write(f"error: {text}\n")
    sys.stderr.flush()
