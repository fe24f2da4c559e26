"""Logging set-up: text for people, one JSON object a line for machines."""

from __future__ import annotations

import json
import logging
import sys


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter()
        if fmt == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # request bodies and URLs belong to DEBUG only (Bolt logs refused bodies at INFO)
    for noisy in ("httpx", "httpx2", "openai", "slack_bolt", "slack_sdk", "urllib3", "aiosqlite"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
