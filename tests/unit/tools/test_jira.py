"""The Jira tools through the registry, against a strict fake Jira reached over real HTTP."""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bot.config import Settings, load_settings
from bot.messages import ToolCall
from bot.tools.base import ToolRegistry
from bot.tools.jira import JiraTools, jira_tools
from tests.fakes.jira_server import FakeJira

EMAIL = "bot@example.com"
TOKEN = "cloud-secret-token-123"
PAT = "server-secret-pat-456"
LIMIT = 5.0


def make_settings(**values: Any) -> Settings:
    base: dict[str, Any] = {
        "JIRA_URL": None,
        "JIRA_EMAIL": None,
        "JIRA_API_TOKEN": None,
        "JIRA_PAT": None,
        "JIRA_PROJECT": "TASK",
        "JIRA_ALLOWED_PROJECTS": None,
        "TOOL_TIMEOUT_S": LIMIT,
    }
    base.update(values)
    return load_settings(_env_file=None, **base)


def cloud_settings(fake: FakeJira, **values: Any) -> Settings:
    return make_settings(JIRA_URL=fake.url, JIRA_EMAIL=EMAIL, JIRA_API_TOKEN=TOKEN, **values)


def registry_for(settings: Settings, *, timeout: float | None = None) -> ToolRegistry:
    limit = settings.limits.TOOL_TIMEOUT_S
    registry = ToolRegistry(default_timeout=limit)
    registry.add_object(JiraTools(settings.jira, limit, timeout=timeout))
    return registry


async def call(registry: ToolRegistry, name: str, **arguments: Any) -> dict[str, Any]:
    return json.loads((await registry.run(ToolCall("call_1", name, json.dumps(arguments)))).output)


@pytest.fixture
def cloud() -> Iterator[FakeJira]:
    with FakeJira(email=EMAIL, api_token=TOKEN, required_fields={}) as fake:
        yield fake


@pytest.fixture
def server() -> Iterator[FakeJira]:
    with FakeJira(pat=PAT) as fake:
        yield fake


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ---- registration


def test_without_jira_url_the_tools_are_not_offered() -> None:
    assert jira_tools(make_settings().jira, LIMIT) is None


def test_tools_are_registered_with_descriptions(cloud: FakeJira) -> None:
    registry = registry_for(cloud_settings(cloud))
    assert sorted(registry.names()) == [
        "jira_create_issue",
        "jira_get_issue",
        "jira_search_issues",
    ]
    assert registry.writes("jira_create_issue")
    assert not registry.writes("jira_get_issue")
    spec = registry.get("jira_create_issue").spec  # type: ignore[union-attr]
    assert "allowed projects" in spec.description
    assert spec.parameters["required"] == ["summary", "description"]
    assert "255" in spec.parameters["properties"]["summary"]["description"]


def test_jira_down_at_start_up_does_not_prevent_construction() -> None:
    settings = make_settings(JIRA_URL=closed_port_url(), JIRA_PAT=PAT)
    tools = jira_tools(settings.jira, LIMIT)
    assert isinstance(tools, JiraTools)
    assert tools._client is None  # nothing was contacted


# ---- reads, Cloud and Server


async def test_get_issue_cloud(cloud: FakeJira) -> None:
    cloud.add_issue(
        "TASK-7",
        summary="Login fails on Safari",
        description="Steps: open the page",
        status="In Progress",
        priority="High",
        assignee="Maria Silva",
    )
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="task-7")
    assert result == {
        "key": "TASK-7",
        "summary": "Login fails on Safari",
        "status": "In Progress",
        "issue_type": "Task",
        "priority": "High",
        "assignee": "Maria Silva",
        "reporter": "Reporter Person",
        "created": cloud.issues["TASK-7"]["created"],
        "updated": cloud.issues["TASK-7"]["updated"],
        "description": "Steps: open the page",
        "url": f"{cloud.url}/browse/TASK-7",
    }
    (request,) = cloud.calls("GET", r"/issue/")
    assert request.auth == "basic"
    expected = base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()
    assert request.headers["authorization"] == f"Basic {expected}"
    assert not cloud.calls(path_regex="serverInfo")  # no server-info call


async def test_get_issue_server_uses_the_pat(server: FakeJira) -> None:
    server.add_issue("TASK-1", summary="Printer on fire")
    settings = make_settings(JIRA_URL=server.url, JIRA_PAT=PAT)
    result = await call(registry_for(settings), "jira_get_issue", issue_key="TASK-1")
    assert result["summary"] == "Printer on fire"
    assert result["assignee"] is None
    (request,) = server.calls("GET", r"/issue/")
    assert request.headers["authorization"] == f"Bearer {PAT}"


async def test_search_cloud_uses_the_new_endpoint(cloud: FakeJira) -> None:
    for n in range(1, 26):
        cloud.add_issue(f"TASK-{n}", summary=f"Issue {n}", status="Done" if n % 2 else "To Do")
    registry = registry_for(cloud_settings(cloud))
    result = await call(
        registry, "jira_search_issues", jql="project = TASK ORDER BY key DESC", max_results=50
    )
    assert result["count"] == 20
    assert result["more"] is True
    assert result["issues"][0] == {
        "key": "TASK-25",
        "summary": "Issue 25",
        "status": "Done",
        "assignee": None,
        "url": f"{cloud.url}/browse/TASK-25",
    }
    (request,) = cloud.calls(path_regex=r"/search")
    assert request.path == "/rest/api/2/search/jql"
    assert request.query["maxResults"] == ["20"]

    result = await call(registry, "jira_search_issues", jql='status = "To Do" AND text ~ "1"')
    assert [i["key"] for i in result["issues"]] == [
        "TASK-18",
        "TASK-16",
        "TASK-14",
        "TASK-12",
        "TASK-10",
    ]
    assert result["more"] is False


async def test_search_server_uses_the_old_endpoint(server: FakeJira) -> None:
    server.add_issue("TASK-1", summary="One")
    server.add_issue("TASK-2", summary="Two")
    settings = make_settings(JIRA_URL=server.url, JIRA_PAT=PAT)
    result = await call(registry_for(settings), "jira_search_issues", jql="project = TASK")
    assert [i["key"] for i in result["issues"]] == ["TASK-2", "TASK-1"]
    assert result["more"] is False
    (request,) = server.calls(path_regex=r"/search")
    assert request.path == "/rest/api/2/search"
    assert request.auth == "bearer"


async def test_search_switches_endpoint_when_the_guess_is_wrong() -> None:
    # basic auth suggests Cloud, but this is a Server: /search/jql is 404, /search works
    with FakeJira(email=EMAIL, api_token=TOKEN, deployment="Server") as fake:
        fake.add_issue("TASK-1", summary="One")
        registry = registry_for(cloud_settings(fake))
        for _ in range(2):
            result = await call(registry, "jira_search_issues", jql="project = TASK")
            assert result["count"] == 1
        paths = [r.path for r in fake.calls(path_regex=r"/search")]
        assert paths == ["/rest/api/2/search/jql", "/rest/api/2/search", "/rest/api/2/search"]


async def test_bad_jql_is_explained(cloud: FakeJira) -> None:
    result = await call(
        registry_for(cloud_settings(cloud)), "jira_search_issues", jql="project = NOPE"
    )
    assert result["error"].startswith("Jira rejected the search: Error in the JQL Query")
    assert "NOPE" in result["error"]


async def test_long_description_is_trimmed(cloud: FakeJira) -> None:
    cloud.add_issue("TASK-1", summary="Huge", description="x" * 200_000)
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="TASK-1")
    assert len(result["description"]) == 2000
    assert result["description"].endswith("[truncated]")


async def test_a_malformed_key_is_refused_without_a_request(cloud: FakeJira) -> None:
    registry = registry_for(cloud_settings(cloud))
    result = await call(registry, "jira_get_issue", issue_key="../../myself")
    assert "not a Jira issue key" in result["error"]
    assert cloud.requests == []


# ---- read errors


async def test_not_found(cloud: FakeJira) -> None:
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="TASK-99")
    assert result == {
        "error": "Issue TASK-99 does not exist or you do not have permission to see it."
    }


async def test_forbidden(cloud: FakeJira) -> None:
    cloud.add_issue("TASK-1")
    cloud.fail_next(r"/issue/TASK-1$", 403)
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="TASK-1")
    assert "denied permission" in result["error"]
    assert "403" in result["error"]
    assert len(cloud.calls("GET", r"/issue/")) == 1


async def test_authentication_failure_never_shows_the_token(cloud: FakeJira) -> None:
    wrong = "wrong-token-789"
    settings = make_settings(JIRA_URL=cloud.url, JIRA_EMAIL=EMAIL, JIRA_API_TOKEN=wrong)
    result = await registry_for(settings).run(
        ToolCall("c", "jira_get_issue", '{"issue_key": "TASK-1"}')
    )
    raw = result.output
    assert "Jira authentication failed" in json.loads(raw)["error"]
    assert wrong not in raw
    assert base64.b64encode(f"{EMAIL}:{wrong}".encode()).decode() not in raw
    assert "Basic" not in raw
    assert len(cloud.requests) == 1  # no retry


async def test_rate_limit_within_the_time_limit_is_waited_out(cloud: FakeJira) -> None:
    cloud.add_issue("TASK-1", summary="Eventually")
    cloud.fail_next(r"/issue/TASK-1$", 429, headers={"Retry-After": "1"})
    started = time.monotonic()
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="TASK-1")
    assert result["summary"] == "Eventually"
    assert 1.0 <= time.monotonic() - started < LIMIT
    assert len(cloud.calls("GET", r"/issue/")) == 2


async def test_rate_limit_beyond_the_time_limit_is_reported(cloud: FakeJira) -> None:
    cloud.fail_next(r"/issue/TASK-1$", 429, headers={"Retry-After": "120"})
    started = time.monotonic()
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="TASK-1")
    assert result == {"error": "Jira is rate limiting, try again in 120 s."}
    assert time.monotonic() - started < 1.0
    assert len(cloud.requests) == 1


async def test_unavailable_is_retried_for_reads(cloud: FakeJira) -> None:
    cloud.add_issue("TASK-1", summary="Back")
    cloud.fail_next(r"/issue/TASK-1$", 503)
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="TASK-1")
    assert result["summary"] == "Back"


async def test_server_error(cloud: FakeJira) -> None:
    cloud.fail_next(r"/issue/TASK-1$", 500)
    result = await call(registry_for(cloud_settings(cloud)), "jira_get_issue", issue_key="TASK-1")
    assert "HTTP 500" in result["error"]
    assert len(cloud.requests) == 1


async def test_connection_refused() -> None:
    settings = make_settings(JIRA_URL=closed_port_url(), JIRA_EMAIL=EMAIL, JIRA_API_TOKEN=TOKEN)
    started = time.monotonic()
    result = await call(registry_for(settings), "jira_get_issue", issue_key="TASK-1")
    assert result["error"].startswith("Could not connect to Jira")
    assert time.monotonic() - started < 2.0


async def test_a_hung_jira_times_out_within_the_limit(cloud: FakeJira) -> None:
    cloud.hang_next(30, r"/issue/")
    settings = cloud_settings(cloud, TOOL_TIMEOUT_S=3)
    started = time.monotonic()
    result = await call(registry_for(settings, timeout=1), "jira_get_issue", issue_key="TASK-1")
    assert result == {
        "error": "Jira did not answer within 1 s. It may be down or overloaded. Try again later."
    }
    assert time.monotonic() - started < 3


async def test_the_default_request_timeout_beats_the_tool_limit(cloud: FakeJira) -> None:
    cloud.hang_next(30, r"/issue/")
    settings = cloud_settings(cloud, TOOL_TIMEOUT_S=2)
    started = time.monotonic()
    result = await call(registry_for(settings), "jira_get_issue", issue_key="TASK-1")
    assert result["error"].startswith("Jira did not answer within 1.6 s")
    assert time.monotonic() - started < 2


# ---- create


async def test_create_cloud(cloud: FakeJira) -> None:
    registry = registry_for(cloud_settings(cloud))
    result = await call(
        registry,
        "jira_create_issue",
        summary="Call Ana Lima (Acme Corp) back",
        description="Ana Lima at Acme Corp asked for a call about her invoice.",
        priority="High",
        labels=["crm", "follow up"],
    )
    assert result == {"key": "TASK-1", "url": f"{cloud.url}/browse/TASK-1"}
    assert cloud.created == ["TASK-1"]
    issue = cloud.issues["TASK-1"]
    assert issue["summary"] == "Call Ana Lima (Acme Corp) back"
    assert issue["priority"] == "High"
    assert issue["labels"][:2] == ["crm", "follow-up"]
    assert issue["labels"][2].startswith("bot-")
    (post,) = cloud.calls("POST")
    assert post.path == "/rest/api/2/issue"
    assert post.json["fields"]["project"] == {"key": "TASK"}
    assert post.json["fields"]["issuetype"] == {"name": "Task"}
    assert post.auth == "basic"


async def test_a_create_carries_its_call_s_marker_and_is_found_by_it_after_a_restart(
    cloud: FakeJira,
) -> None:
    """The journal gives a create its marker; resumed after a crash, the call is looked up
    by that marker (found: its result; not found: an error saying so), never sent again."""
    registry = registry_for(cloud_settings(cloud))
    arguments = json.dumps({"summary": "Printer on fire", "description": "Floor 2."})
    create = ToolCall("call_1", "jira_create_issue", arguments, marker="bot-0123456789")
    assert json.loads((await registry.run(create)).output)["key"] == "TASK-1"
    assert cloud.issues["TASK-1"]["labels"] == ["bot-0123456789"]

    found = json.loads((await registry.recover(create)).output)
    assert (found["key"], found["url"]) == ("TASK-1", f"{cloud.url}/browse/TASK-1")
    other = ToolCall("call_2", "jira_create_issue", arguments, marker="bot-9999999999")
    missing = json.loads((await registry.recover(other)).output)["error"]
    assert "most likely not created" in missing and "bot-9999999999" in missing
    assert cloud.created == ["TASK-1"]
    assert len(cloud.calls("POST", r"/issue$")) == 1


async def test_create_server_in_an_allowed_project(server: FakeJira) -> None:
    server.projects["OPS"] = {**server.projects["TASK"], "id": "10100", "key": "OPS", "next": 5}
    settings = make_settings(JIRA_URL=server.url, JIRA_PAT=PAT, JIRA_ALLOWED_PROJECTS="TASK,OPS")
    result = await call(
        registry_for(settings),
        "jira_create_issue",
        summary="Disk full",
        description="on db-1",
        project_key="ops",
        issue_type="Bug",
    )
    assert result["key"] == "OPS-5"
    assert server.issues["OPS-5"]["issuetype"] == "Bug"
    assert server.calls("POST")[0].auth == "bearer"


async def test_create_outside_the_allowed_projects_is_refused(cloud: FakeJira) -> None:
    registry = registry_for(cloud_settings(cloud, JIRA_ALLOWED_PROJECTS="TASK,OPS"))
    result = await call(
        registry, "jira_create_issue", summary="x", description="y", project_key="SEC"
    )
    assert result == {
        "error": "Creating issues in project SEC is not allowed. Allowed projects: TASK, OPS."
    }
    assert cloud.requests == []


async def test_create_is_refused_when_no_project_is_configured(cloud: FakeJira) -> None:
    registry = registry_for(cloud_settings(cloud, JIRA_PROJECT=None))
    result = await call(registry, "jira_create_issue", summary="x", description="y")
    assert "no project is allowed" in result["error"]
    assert cloud.requests == []


async def test_field_errors_name_the_field() -> None:
    with FakeJira(email=EMAIL, api_token=TOKEN, required_fields={"TASK": ["components"]}) as fake:
        result = await call(
            registry_for(cloud_settings(fake)), "jira_create_issue", summary="x", description="y"
        )
        assert result == {"error": "Jira rejected the issue: components: Component/s is required."}
        assert fake.created == []
        assert len(fake.calls("POST")) == 1


async def test_rate_limited_create_is_retried_once_it_fits(cloud: FakeJira) -> None:
    cloud.fail_next(r"/issue$", 429, headers={"Retry-After": "1"}, method="POST")
    result = await call(
        registry_for(cloud_settings(cloud)), "jira_create_issue", summary="x", description="y"
    )
    assert result["key"] == "TASK-1"
    assert cloud.created == ["TASK-1"]
    assert len(cloud.calls("POST")) == 2  # the 429 was not processed


async def test_connection_reset_after_the_create_makes_no_duplicate(cloud: FakeJira) -> None:
    cloud.reset_connection_next(r"/rest/api/2/issue$", method="POST")
    result = await call(
        registry_for(cloud_settings(cloud)),
        "jira_create_issue",
        summary="Only once",
        description="y",
    )
    assert cloud.created == ["TASK-1"]
    assert len(cloud.calls("POST", r"/issue$")) == 1
    assert result["key"] == "TASK-1"
    assert result["url"] == f"{cloud.url}/browse/TASK-1"
    assert "was created" in result["note"] and "not sent again" in result["note"]


async def test_connection_reset_before_the_create_is_reported(cloud: FakeJira) -> None:
    cloud.reset_connection_next(r"/rest/api/2/issue$", method="POST", before=True)
    result = await call(
        registry_for(cloud_settings(cloud)), "jira_create_issue", summary="x", description="y"
    )
    assert cloud.created == []
    assert len(cloud.calls("POST", r"/issue$")) == 1
    assert "the connection to Jira broke" in result["error"]
    assert "so it was most likely not created" in result["error"]


async def test_server_error_on_create_is_checked_not_repeated(cloud: FakeJira) -> None:
    cloud.fail_next(r"/issue$", 500, method="POST")
    result = await call(
        registry_for(cloud_settings(cloud)), "jira_create_issue", summary="x", description="y"
    )
    assert "HTTP 500" in result["error"]
    assert "not created" in result["error"]
    assert len(cloud.calls("POST")) == 1
    assert cloud.created == []


async def test_create_when_jira_is_down() -> None:
    settings = make_settings(
        JIRA_URL=closed_port_url(), JIRA_EMAIL=EMAIL, JIRA_API_TOKEN=TOKEN, JIRA_PROJECT="TASK"
    )
    result = await call(registry_for(settings), "jira_create_issue", summary="x", description="y")
    assert result["error"].startswith("Could not connect to Jira")
    assert "not created" in result["error"]


async def test_a_too_long_summary_is_refused(cloud: FakeJira) -> None:
    result = await call(
        registry_for(cloud_settings(cloud)),
        "jira_create_issue",
        summary="s" * 300,
        description="y",
    )
    assert "Jira allows 255" in result["error"]
    assert cloud.requests == []


async def test_a_timed_out_create_is_found_not_repeated(cloud: FakeJira) -> None:
    # Jira answers the create only after the client gave up, but does create the issue
    cloud.hang_next(1.5, r"/issue$", method="POST")
    settings = cloud_settings(cloud, TOOL_TIMEOUT_S=6)
    result = await call(
        registry_for(settings, timeout=1), "jira_create_issue", summary="Slow", description="y"
    )
    assert cloud.created == ["TASK-1"]
    assert len(cloud.calls("POST")) == 1
    assert result["key"] == "TASK-1"
    assert "did not answer within 1 s" in result["note"]
