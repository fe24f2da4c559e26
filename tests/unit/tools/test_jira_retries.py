"""The Jira client's retries (urllib3's Retry mounted on its session), against the fake
Jira over real HTTP: what is retried, how often, and never past the time limit."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.fakes.jira_server import FakeJira
from tests.unit.tools.test_jira import EMAIL, TOKEN, call, cloud_settings, registry_for


@pytest.fixture
def cloud() -> Iterator[FakeJira]:
    with FakeJira(email=EMAIL, api_token=TOKEN, required_fields={}) as fake:
        yield fake


async def test_a_dropped_read_is_asked_again(cloud: FakeJira) -> None:
    cloud.add_issue("TASK-1", summary="Still there")
    cloud.reset_connection_next(r"/issue/TASK-1$")
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="TASK-1")
    assert result["summary"] == "Still there"
    assert len(cloud.calls("GET", r"/issue/TASK-1$")) == 2


async def test_reads_are_tried_three_times_at_most(cloud: FakeJira) -> None:
    cloud.fail_next(r"/issue/TASK-1$", 502, times=5)
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="TASK-1")
    assert "HTTP 502" in result["error"]
    assert len(cloud.calls("GET", r"/issue/TASK-1$")) == 3


async def test_a_retry_that_would_pass_the_limit_is_not_made(cloud: FakeJira) -> None:
    # the second retry's back-off (2 s) leaves no second for the request in a 3 s limit
    cloud.fail_next(r"/issue/TASK-1$", 503, times=5)
    started = time.monotonic()
    settings = cloud_settings(cloud, TOOL_TIMEOUT_S=3)
    result = await call(registry_for(settings), "jira_get_issue", issue_key="TASK-1")
    assert "HTTP 503" in result["error"]
    assert len(cloud.calls("GET", r"/issue/TASK-1$")) == 2
    assert time.monotonic() - started < 2


async def test_a_create_is_not_retried_after_a_5xx(cloud: FakeJira) -> None:
    cloud.fail_next(r"/issue$", 503, method="POST")
    result = await call(
        registry_for(cloud_settings(cloud)), "jira_create_issue", summary="x", description="y"
    )
    assert "not created" in result["error"]
    assert len(cloud.calls("POST", r"/issue$")) == 1
