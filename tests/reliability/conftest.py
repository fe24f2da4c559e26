"""The Slack app's fixtures (tests/scenarios/slack/conftest.py) for the Slack cases here."""

from tests.scenarios.slack.conftest import (  # noqa: F401 - fixtures, used by name
    bot,
    bot_database_url,
    clock,
    db,
    fake_slack,
    start_bot,
)
