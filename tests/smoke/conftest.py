"""One llama-server for the session (``llama_server``), and the Slack app's fixtures
(tests/scenarios/slack/conftest.py) for the Slack cases here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.scenarios.slack.conftest import (  # noqa: F401 - fixtures, used by name
    bot_database_url,
    clock,
    db,
    fake_jira,
    fake_slack,
    start_bot,
)
from tests.smoke.llama import LlamaServer, installed, start


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    binary, model = installed()
    server = start(binary, model, tmp_path_factory.mktemp("llama") / "llama-server.log")
    yield server
    server.stop()
