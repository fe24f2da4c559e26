"""MCP servers through the agent core: the real fake MCP server (tests/fakes/mcp_server.py,
the SDK's own server side) over stdio and over Streamable HTTP on 127.0.0.1, the real
openai client and the strict fake model, in both API modes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bot.agent.approval import APPROVAL
from bot.agent.conversations import Incoming
from bot.config import load_settings
from bot.messages import ToolCall
from bot.wiring import Services, build_services
from tests.fakes.mcp_fake import (
    HttpServer,
    Recording,
    eventually,
    free_port,
    gone,
    stdio_entry,
    write_config,
)
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse
from tests.observers import Watching
from tests.stored_turns import history

API_MODES = ["chat", "responses"]
#: a server's first connection (a Python process starting) on a busy machine
READY_S = 30


@pytest.fixture
def recording(tmp_path) -> Recording:  # type: ignore[no-untyped-def]
    return Recording(tmp_path / "calls.jsonl")


@pytest.fixture
def http_server(recording: Recording) -> Iterator[HttpServer]:
    server = HttpServer(recording)
    yield server
    server.stop()


@pytest.fixture
def with_mcp(make_services, tmp_path) -> Callable[..., Services]:  # type: ignore[no-untyped-def]
    """``with_mcp(servers, **settings)``: the services with those mcpServers entries."""

    def make(servers: dict[str, Any], **settings: Any) -> Services:
        return make_services(MCP_CONFIG=str(write_config(tmp_path, servers)), **settings)

    return make


def entry(transport: str, recording: Recording, http: HttpServer, **extra: Any) -> dict:
    if transport == "stdio":
        return stdio_entry(recording, **extra)
    http.start()
    return {"url": http.url, **extra}


def tool_results(messages) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Each stored tool result by its call id, decoded when it is JSON."""
    results = {}
    for m in messages:
        if m.role == "tool":
            try:
                results[m.tool_call_id] = json.loads(m.content)
            except json.JSONDecodeError:
                results[m.tool_call_id] = m.content
    return results


async def turn(services: Services, text: str):  # type: ignore[no-untyped-def]
    """One turn in channel C1, answered by what the test scripted."""
    return await services.conversations.ask(Incoming("C1", text, "U1"))


@pytest.mark.parametrize("api", API_MODES)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_read_runs_and_a_write_waits_for_approval(
    with_mcp, fake_openai: FakeOpenAI, recording, http_server, api: str, transport: str
) -> None:
    services = with_mcp({"fake": entry(transport, recording, http_server)}, LLM_API=api)
    assert await services.registry.ready(READY_S) == []
    fake_openai.script(
        Reply(
            tool_calls=[
                ToolUse("fake__lookup", {"key": "T-1"}, "r1"),
                ToolUse("fake__create_ticket", {"summary": "Printer on fire"}, "w1"),
            ]
        ),
        Reply(text="T-1 is open; I created the ticket."),
    )

    paused = await services.conversations.ask(
        Incoming("C1", "look up T-1 and open a ticket", "U1", "1.1"), Watching()
    )

    assert paused.outcome == "awaiting_approval"
    assert [c.id for c in paused.interruptions] == ["w1"]
    assert recording.calls() == []  # the server saw nothing before the approval
    # the approval card shows the call's description and its arguments
    assert services.registry.describe(paused.interruptions[0]) == "Running create_ticket on fake"
    first = fake_openai.requests[0]
    assert first.status == 200 and first.api == api  # the strict fake took the tool specs
    assert {"fake__lookup", "fake__create_ticket"} <= set(first.tool_names)

    reply = await services.conversations.resume(paused.turn_id, {"w1": APPROVAL})

    assert reply.text == "T-1 is open; I created the ticket."
    assert sorted(recording.tools()) == ["create_ticket", "lookup"]
    results = tool_results(await history(services).messages("C1"))
    assert results == {"r1": {"key": "T-1", "status": "open"}, "w1": "created: Printer on fire"}
    assert all(r.status == 200 for r in fake_openai.requests)


async def test_a_write_approved_just_after_a_restart_waits_for_its_server(
    with_mcp, fake_openai: FakeOpenAI, recording
) -> None:
    """A write paused for approval; the bot restarts and the press comes before the MCP
    server has reconnected -> the turn goes on once the server is there: the write runs
    (not "tool not found")."""
    servers = {"fake": stdio_entry(recording)}
    before = with_mcp(servers)
    assert await before.registry.ready(READY_S) == []
    fake_openai.script(
        ToolUse("fake__create_ticket", {"summary": "Printer on fire"}, "w1"),
        Reply(text="Created."),
    )
    paused = await before.conversations.ask(Incoming("C1", "ticket!", "U1"), Watching())
    assert paused.outcome == "awaiting_approval"
    await before.close()

    after = with_mcp(servers)  # a new process: its server connects from now on
    assert "fake__create_ticket" not in after.registry
    reply = await after.conversations.resume(paused.turn_id, {"w1": APPROVAL})

    assert reply is not None and reply.text == "Created."
    assert recording.tools() == ["create_ticket"]


async def test_reads_and_writes_follow_the_annotations(with_mcp, recording) -> None:
    services = with_mcp({"fake": stdio_entry(recording)})
    assert await services.registry.ready(READY_S) == []
    registry = services.registry
    assert not registry.writes("fake__lookup") and not registry.writes("fake__note")
    assert registry.writes("fake__create_ticket")
    assert registry.writes("fake__purge")  # readOnlyHint with destructiveHint: a write
    assert registry.get("fake__lookup").source == "fake"  # type: ignore[union-attr]
    assert registry.get("fake__lookup").description == "Look a ticket up by its key."  # type: ignore[union-attr]
    assert registry.get("crm_find_contacts").source == "CRM"  # type: ignore[union-attr]
    assert registry.get("get_current_time").source == "built in"  # type: ignore[union-attr]


async def test_deny_and_allow_lists(with_mcp, fake_openai: FakeOpenAI, recording) -> None:
    services = with_mcp(
        {
            "fake": stdio_entry(recording, deny=["create_ticket", "purge"]),
            "ro": stdio_entry(recording, allow=["lookup", "note", "missing"]),
        }
    )
    assert await services.registry.ready(READY_S) == []
    names = services.registry.names()
    assert "fake__lookup" in names and "fake__create_ticket" not in names
    assert "fake__purge" not in names
    assert sorted(n for n in names if n.startswith("ro__")) == ["ro__lookup", "ro__note"]
    fake_openai.script(ToolUse("fake__create_ticket", {"summary": "x"}, "c1"), "I cannot.")

    reply = await turn(services, "open a ticket")

    assert reply.text == "I cannot."
    assert "fake__create_ticket" not in fake_openai.requests[0].tool_names
    assert "not found" in tool_results(await history(services).messages("C1"))["c1"]["error"]
    assert recording.calls() == []


async def test_failures_are_results_the_model_reads(
    with_mcp, fake_openai: FakeOpenAI, recording
) -> None:
    services = with_mcp({"fake": stdio_entry(recording)}, TOOL_TIMEOUT_S=2)
    assert await services.registry.ready(READY_S) == []
    fake_openai.script(
        Reply(
            tool_calls=[
                ToolUse("fake__explode", {"reason": "disk on fire"}, "raises"),
                ToolUse("fake__refuse", {"key": "T-9"}, "is_error"),
                ToolUse("fake__slow", {"seconds": 30}, "hangs"),
                ToolUse("fake__lookup", {"key": 7}, "bad_arguments"),
            ]
        ),
        ToolUse("fake__note", {"text": "still there"}, "after"),
        "done",
    )

    await turn(services, "try everything")

    results = tool_results(await history(services).messages("C1"))
    assert "explode" in results["raises"]["error"]
    assert results["is_error"] == {"error": "no ticket T-9"}
    assert results["hangs"] == {"error": "'fake__slow' timed out after 2 s."}
    assert "Invalid arguments for 'fake__lookup'" in results["bad_arguments"]["error"]
    assert results["after"] == "noted: still there\n(that is all)"  # the session survived
    assert "lookup" not in recording.tools()  # bad arguments never reach the server


async def test_names_the_apis_refuse_are_sanitised(
    with_mcp, fake_openai: FakeOpenAI, recording, caplog
) -> None:
    caplog.set_level(logging.WARNING)
    services = with_mcp({"my fake": stdio_entry(recording)})
    assert await services.registry.ready(READY_S) == []
    names = services.registry.names()
    assert "my_fake__search_v2" in names
    (long,) = [n for n in names if n.startswith("my_fake__find_x")]
    assert len(long) == 64
    assert not [n for n in names if "odd_schema" in n]  # its schema would be refused
    assert any("odd_schema" in r.getMessage() for r in caplog.records)
    fake_openai.script(ToolUse("my_fake__search_v2", {"query": "printers"}, "s"), "found")

    await turn(services, "search")

    assert fake_openai.requests[0].status == 200  # every name and schema was accepted
    assert tool_results(await history(services).messages("C1"))["s"] == {"result": "found printers"}
    assert recording.tools() == ["search.v2"]


async def test_a_server_down_at_start_leaves_the_bot_answering(
    with_mcp, fake_openai: FakeOpenAI, recording, caplog
) -> None:
    caplog.set_level(logging.INFO)
    http = HttpServer(recording, port=free_port())
    services = with_mcp({"later": {"url": http.url}})
    assert (await services.registry.ready(READY_S))[0].startswith("later: connection refused")
    fake_openai.script("Hello without it.")

    assert (await turn(services, "hi")).text == "Hello without it."

    try:
        http.start()
        # retried in the background: its tools appear once it answers
        assert await eventually(lambda: "later__lookup" in services.registry.names(), 40)
    finally:
        http.stop()
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name == "bot.tools.mcp.connection"
    ]
    assert warnings == [
        "MCP server later (http) failed to connect: connection refused or host unreachable; "
        "the bot goes on without its tools and tries again in the background"
    ]
    connected = [r for r in caplog.records if r.getMessage().startswith("MCP server later")]
    assert connected[-1].levelno == logging.INFO
    assert connected[-1].getMessage().startswith("MCP server later (http) connected: ")


async def test_a_killed_stdio_server_is_restarted_at_the_next_call(
    with_mcp, fake_openai: FakeOpenAI, recording, caplog
) -> None:
    caplog.set_level(logging.INFO)
    services = with_mcp({"fake": stdio_entry(recording)}, WRITE_APPROVAL="off")
    assert await services.registry.ready(READY_S) == []
    fake_openai.script(ToolUse("fake__whoami", {}, "who1"), "first")
    await turn(services, "who are you?")
    first = tool_results(await history(services).messages("C1"))["who1"]["pid"]
    os.kill(first, signal.SIGKILL)
    assert await eventually(lambda: gone(first), 10)

    fake_openai.script(
        Reply(tool_calls=[ToolUse("fake__whoami", {}, "who2")]),
        ToolUse("fake__create_ticket", {"summary": "after the crash"}, "w"),
        "second",
    )
    assert (await turn(services, "again?")).text == "second"

    results = tool_results(await history(services).messages("C1"))
    assert results["who2"]["pid"] != first
    assert results["w"] == "created: after the crash"  # a write too: it never reached the dead one
    said = [r for r in caplog.records if r.name == "bot.tools.mcp.connection"]
    dropped = [r.getMessage() for r in said if r.levelno == logging.WARNING]
    assert dropped == [
        "MCP server fake (stdio) dropped: the server ended the connection; it is connected "
        "again at the next call"
    ]
    connected = [r for r in said if r.getMessage().startswith("MCP server fake (stdio) connected")]
    assert [r.levelno for r in connected] == [logging.INFO] * 2  # at first, and once restarted


async def test_a_killed_http_server_is_reconnected_at_the_next_call(
    with_mcp, fake_openai: FakeOpenAI, recording, http_server
) -> None:
    services = with_mcp({"remote": {"url": http_server.start().url}}, WRITE_APPROVAL="off")
    assert await services.registry.ready(READY_S) == []
    fake_openai.script(ToolUse("remote__lookup", {"key": "A"}, "a"), "one")
    await turn(services, "first")

    http_server.kill()
    fake_openai.script(ToolUse("remote__lookup", {"key": "B"}, "b"), "two")
    await turn(services, "while it is down")
    down = tool_results(await history(services).messages("C1"))["b"]
    assert "cannot be reached" in down["error"]

    http_server.start()
    fake_openai.script(
        Reply(tool_calls=[ToolUse("remote__lookup", {"key": "C"}, "c")]),
        ToolUse("remote__create_ticket", {"summary": "back"}, "w"),
        "three",
    )
    assert (await turn(services, "it is back")).text == "three"

    results = tool_results(await history(services).messages("C1"))
    assert results["c"] == {"key": "C", "status": "open"}
    assert results["w"] == "created: back"
    assert recording.tools() == ["lookup", "lookup", "create_ticket"]


async def test_a_stdio_server_gets_only_the_environment_the_file_names(
    with_mcp, fake_openai: FakeOpenAI, recording, monkeypatch
) -> None:
    monkeypatch.setenv("HOME", "/home/bot")
    monkeypatch.setenv("USER", "bot")
    entry = stdio_entry(recording)
    entry["env"]["GREETING"] = "hello"
    services = with_mcp({"fake": entry})
    assert await services.registry.ready(READY_S) == []
    fake_openai.script(ToolUse("fake__whoami", {}, "who"), "ok")

    await turn(services, "who are you?")

    names = set(tool_results(await history(services).messages("C1"))["who"]["env"])
    # Python itself may set LC_CTYPE in a process started without a locale
    assert names - {"LC_CTYPE"} == {"GREETING", "PATH", "RECORD_FILE"}


async def test_closing_the_services_stops_the_servers(
    make_services, tmp_path, fake_openai: FakeOpenAI, recording
) -> None:
    services = make_services(
        MCP_CONFIG=str(write_config(tmp_path, {"fake": stdio_entry(recording)}))
    )
    assert await services.registry.ready(READY_S) == []
    pid = json.loads((await services.registry.run(ToolCall("1", "fake__whoami", "{}"))).output)[
        "pid"
    ]

    await services.close()

    assert await eventually(lambda: gone(pid), 15)


def test_services_built_outside_an_event_loop_connect_in_the_first_one(
    sqlite_url: str, tmp_path, recording
) -> None:
    """As a server built in one thread and served in another's loop: nothing starts at
    build time, the first use of the registry in a loop starts the servers."""
    settings = load_settings(
        DATABASE_URL=sqlite_url,
        OPENAI_API_KEY="test-key",
        MCP_CONFIG=str(write_config(tmp_path, {"fake": stdio_entry(recording)})),
    )
    services = build_services(settings)

    async def use() -> dict[str, Any]:
        try:
            assert await services.registry.ready(READY_S) == []
            return json.loads(
                (await services.registry.run(ToolCall("1", "fake__lookup", '{"key": "K"}'))).output
            )
        finally:
            await services.close()

    assert asyncio.run(use()) == {"key": "K", "status": "open"}
