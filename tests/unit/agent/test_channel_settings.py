"""Each channel's own settings as a turn reads them, on a ScriptedModel and a real database
(SQLite and PostgreSQL): instructions, tools, a create's default project, write approval."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.agent.approval import APPROVAL
from bot.agent.channels import Channels
from bot.agent.conversations import Conversations, Incoming
from bot.agent.loop import CHANNEL_INSTRUCTIONS, NOT_IN_CHANNEL, Loop
from bot.channels import BY_ADMIN, BY_CLI, BadChannelSetting
from bot.config import ConversationSettings
from bot.llm.scripted import ScriptedModel
from bot.messages import ModelReply, Outcome, ToolCall
from bot.store.channels import ChannelSettingsStore
from bot.store.db import create_engines
from bot.tools.base import ToolRegistry
from bot.tools.tool import tool
from bot.wiring import build_conversations
from tests.unit.agent.test_loop import Desk, calls

SYSTEM = "You are a test."


class Projects(Desk):
    @tool(writes=True, defaults={"project_key": "jira_project"})
    def open_issue(self, summary: str, project_key: str | None = None) -> dict[str, str]:
        """Open an issue.

        Args:
            summary: what it is about.
            project_key: where.
        """
        self.created[project_key or "none"] = summary
        return {"key": f"{project_key}-1"}


Bot = tuple[Conversations, ScriptedModel, Projects, Channels]


@pytest.fixture
async def bot(database_url: str) -> AsyncIterator[Bot]:
    engines = create_engines(database_url)
    model, desk, registry = ScriptedModel(), Projects(), ToolRegistry()
    registry.add_object(desk)
    channels = Channels(ChannelSettingsStore(engines), ["SUP", "TASK"], registry.names)
    loop = Loop(model, registry, SYSTEM)
    settings = ConversationSettings(HISTORY_SUMMARY=False)
    yield build_conversations(engines, loop, settings, channels=channels), model, desk, channels
    await engines.dispose()


async def test_instructions_reach_only_that_channels_system_part(bot) -> None:  # type: ignore[no-untyped-def]
    conversations, model, _, channels = bot
    assert channels is not None
    await channels.change("C1", {"instructions": "answer in Portuguese"}, BY_CLI)
    model.then("Olá.", "Hello.")

    await conversations.ask(Incoming("C1", "hi", "U1", "1.1"))
    await conversations.ask(Incoming("C2", "hi", "U1", "1.2"))

    here, elsewhere = model.requests
    assert here.system == f"{SYSTEM}\n\n{CHANNEL_INSTRUCTIONS.format('answer in Portuguese')}"
    assert here.system.startswith(SYSTEM)  # below the bot's own prompt, which keeps its rules
    assert elsewhere.system == SYSTEM


async def test_tools_limit_what_is_offered_there_and_unset_restores(bot) -> None:  # type: ignore[no-untyped-def]
    conversations, model, _, channels = bot
    every = ["broken", "clock", "create_ticket", "open_issue"]
    await channels.change("C1", {"tools": "clock"}, BY_CLI)
    model.then("a", "b", "c")

    await conversations.ask(Incoming("C1", "hi", "U1", "1.1"))
    await conversations.ask(Incoming("C2", "hi", "U1", "1.2"))
    await channels.change("C1", {"tools": None}, BY_ADMIN)
    await conversations.ask(Incoming("C1", "again", "U1", "1.3"))

    offered = [sorted(t.name for t in r.tools) for r in model.requests]
    assert offered == [["clock"], every, every]
    document = await channels.document("C1")
    assert document["settings"] == {}
    assert [(c["key"], c["value"], c["by"]) for c in document["changes"]] == [
        ("tools", "clock", "cli"),
        ("tools", None, "admin"),
    ]


async def test_a_pattern_offers_what_it_matches(bot) -> None:  # type: ignore[no-untyped-def]
    conversations, model, _, channels = bot
    changed = await channels.change("C1", {"tools": "c*,nothing_*"}, BY_CLI)
    assert changed.warnings == ["tools pattern 'nothing_*' matches no tool offered now"]
    model.then("a")

    await conversations.ask(Incoming("C1", "hi", "U1", "1.1"))

    assert sorted(t.name for t in model.requests[0].tools) == ["clock", "create_ticket"]


async def test_a_bad_key_or_value_changes_nothing(bot) -> None:  # type: ignore[no-untyped-def]
    channels = bot[3]
    await channels.change("C1", {"answer_all": "on"}, BY_CLI)
    for bad in (
        {"instructions": "x", "colour": "red"},
        {"tools": "clock", "answer_all": "maybe"},
        {"jira_project": "NOPE"},
        {"follow_ups": "sometimes"},
    ):
        with pytest.raises(BadChannelSetting):
            await channels.change("C1", bad, BY_CLI)

    assert await channels.values("C1") == {"answer_all": "on"}
    assert len(await channels.changes("C1")) == 1
    assert (await channels.settings("C1")).answer_all
    await channels.change("C1", {"follow_ups": "off", "jira_project": "sup"}, BY_CLI)
    settings = await channels.settings("C1")
    assert settings.follow_ups is False and settings.jira_project == "SUP"


async def test_a_create_uses_the_channels_project_when_the_model_names_none(bot) -> None:  # type: ignore[no-untyped-def]
    conversations, model, desk, channels = bot
    await channels.change("C1", {"jira_project": "SUP"}, BY_CLI)
    opening = ModelReply(None, (ToolCall("c0", "open_issue", '{"summary": "x"}'),))
    model.then(opening, "done", opening, "done")

    await conversations.ask(Incoming("C1", "file it", "U1", "1.1"))
    await conversations.ask(Incoming("C2", "file it", "U1", "1.2"))

    assert desk.created == {"SUP": "x", "none": "x"}


async def test_a_tool_removed_while_its_approval_waits_is_refused(bot) -> None:  # type: ignore[no-untyped-def]
    conversations, model, desk, channels = bot
    await channels.change("C1", {"write_approval": "on"}, BY_CLI)  # the write waits
    model.then(calls("create_ticket"))
    paused = await conversations.ask(Incoming("C1", "open a ticket", "U1", "1.1"))
    assert paused.outcome == Outcome.AWAITING_APPROVAL
    await channels.change("C1", {"tools": "clock"}, BY_ADMIN)
    model.then(lambda request: f"Told: {request.messages[-1].content}")

    done = await conversations.resume(paused.turn_id, {paused.interruptions[0].id: APPROVAL})

    assert desk.created == {}
    assert done is not None and NOT_IN_CHANNEL.format("create_ticket") in done.text
