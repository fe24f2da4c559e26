"""Crashes: ``bot ask`` killed with SIGKILL at each point of a turn, then the channel used
again. No Slack is needed: the CLI stores a turn exactly as a Slack turn is stored.

The three kill points run side by side, one channel each. On PostgreSQL a killed process
leaves its hold on the channel behind until its lease runs out (LEASE, 30 s after its last
renewal): the next turn there waits that long. Here the holds are moved past their expiry
instead of waiting for it (the waiting turn still has to find them expired and take the
channel).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from bot.messages import utcnow
from bot.store.db import create_engine
from bot.store.models import ChannelHoldRow
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Hang, Reply, Request, ToolUse
from tests.reliability.helpers import (
    JIRA_EMAIL,
    JIRA_TOKEN,
    MANY_PROCESSES,
    assert_paired,
    bot_env,
    finish,
    jira_env,
    last_user_text,
    popen_bot,
    stored,
    wait_for,
)

pytestmark = MANY_PROCESSES


@pytest.fixture
def jira() -> Iterator[FakeJira]:
    with FakeJira(email=JIRA_EMAIL, api_token=JIRA_TOKEN, projects={"TASK": {}}) as fake:
        fake.add_issue("TASK-123", summary="Invoice export fails")
        yield fake


@dataclass(frozen=True)
class KillPoint:
    channel: str
    question: str
    #: true once the process is where it should die
    reached: Callable[[], bool]


def model(request: Request) -> Reply | ToolUse | Hang:
    """The scripted model: hangs on the questions to be killed, calls Jira for the one to
    be killed mid-tool, and answers the follow-ups."""
    text = last_user_text(request)
    if text.startswith("follow-up"):
        return Reply(text=f"ok: {text}")
    if "during the tool" in text:
        return ToolUse("jira_get_issue", {"issue_key": "TASK-123"}, "call_b")
    return Hang(30)


def test_killed_mid_turn_then_the_channel_goes_on(
    database_url: str, fake_openai: FakeOpenAI, jira: FakeJira, tmp_path
) -> None:
    """SIGKILL (a) while the model is answering (the fake has the request and hangs),
    (b) while a Jira read is running (the fake Jira has the request and hangs), (c) as
    soon as the user message is stored, before the model answered -> each channel holds
    the user message and a ``running`` turn -> the next ``bot ask`` there is answered and
    marks that turn ``interrupted``; the stored history goes through the strict fake in
    both API modes (``LLM_API=chat``, then ``responses``: it answers 400 to an orphan call
    or result, so each 200 proves the history valid), and includes the killed question."""
    fake_openai.responder = model
    jira.hang_next(30, r"/issue/TASK-123$")
    env = {**bot_env(fake_openai, database_url), **jira_env(jira.url)}

    def model_has(question: str) -> bool:
        return any(last_user_text(r) == question for r in list(fake_openai.requests))

    def stored_question(channel: str) -> bool:
        messages, _ = stored(database_url, channel)
        return bool(messages)

    points = [
        KillPoint("CKA", "kill me during the model call", lambda: model_has(points[0].question)),
        KillPoint(
            "CKB",
            "kill me during the tool call",
            lambda: bool(jira.calls("GET", r"/issue/TASK-123$")),
        ),
        KillPoint("CKC", "kill me once my question is stored", lambda: stored_question("CKC")),
    ]
    journaled = {"CKA": ["user"], "CKB": ["user", "assistant"], "CKC": ["user"]}
    processes = {
        p.channel: popen_bot("ask", "--channel", p.channel, p.question, env=env, cwd=tmp_path)
        for p in points
    }
    try:
        for point in points:
            wait_for(point.reached, f"kill point in {point.channel}", timeout=30, every=0.05)
            processes[point.channel].send_signal(signal.SIGKILL)
            assert processes[point.channel].wait(10) == -signal.SIGKILL
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
            process.communicate()

    for point in points:
        messages, turns = stored(database_url, point.channel)
        assert (messages[0].role, messages[0].content) == ("user", point.question)
        # the journal: the call the model asked for is stored before it runs
        assert [m.role for m in messages] == journaled[point.channel]
        assert [t.outcome for t in turns] == ["running"]

    asyncio.run(expire_tickets(database_url, [p.channel for p in points]))
    for api in ("chat", "responses"):
        follow_ups = run_side_by_side(
            {p.channel: f"follow-up in {api} mode, {p.channel}" for p in points},
            {**env, "LLM_API": api},
            tmp_path,
        )
        for point in points:
            status, out, err = follow_ups[point.channel]
            assert status == 0, err
            assert out.strip() == f"ok: follow-up in {api} mode, {point.channel}"
            asked = f"follow-up in {api} mode, {point.channel}"
            (request,) = [r for r in fake_openai.requests if last_user_text(r) == asked]
            assert request.status == 200 and request.api == api
            assert point.question in str(request.body)  # the killed question is replayed

    for point in points:
        messages, turns = stored(database_url, point.channel)
        # a call cut short got its "interrupted" result when the next turn began
        cut_short = ["tool"] if point.channel == "CKB" else []
        follow_ups = ["user", "assistant", "user", "assistant"]
        assert [m.role for m in messages] == journaled[point.channel] + cut_short + follow_ups
        assert_paired(messages)
        assert [t.outcome for t in turns] == ["interrupted", "answered", "answered"]


async def expire_tickets(database_url: str, channels: list[str]) -> None:
    """LEASE passes for the killed holders: their holds on the channels run out now."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                update(ChannelHoldRow)
                .where(ChannelHoldRow.channel_id.in_(channels))
                .values(lease_until=utcnow() - timedelta(seconds=1))
            )
    finally:
        await engine.dispose()


def run_side_by_side(
    questions: dict[str, str], env: dict[str, str], cwd: Path
) -> dict[str, tuple[int, str, str]]:
    """One ``bot ask`` per channel, all at once; each one's (status, stdout, stderr)."""
    started: dict[str, subprocess.Popen[str]] = {
        channel: popen_bot("ask", "--channel", channel, text, env=env, cwd=cwd)
        for channel, text in questions.items()
    }
    return {channel: finish(process, timeout=60) for channel, process in started.items()}


def test_killed_after_a_create_the_issue_is_remembered(
    database_url: str, fake_openai: FakeOpenAI, jira: FakeJira, tmp_path
) -> None:
    """``bot ask --approve`` creates a Jira issue, and is killed with SIGKILL while the
    model writes its answer (the fake has the request carrying the create's result) ->
    the channel's stored history keeps the call and its result (the round that wrote to
    Jira is stored as soon as it is done), so the next turn's model knows the issue exists
    and need not create it again -> one issue in Jira; the history is valid in both API
    modes; the killed turn is ``interrupted``."""
    created = {"summary": "Printer on fire", "description": "Floor 3."}

    def model(request: Request) -> Reply | ToolUse | Hang:
        text = last_user_text(request)
        if text.startswith("follow-up"):
            return Reply(text=f"ok: {text}")
        if any(item.get("role") == "tool" for item in request.body["messages"]):
            return Hang(30)  # the answer after the create: killed meanwhile
        return ToolUse("jira_create_issue", created, "new")

    fake_openai.responder = model
    env = {**bot_env(fake_openai, database_url), **jira_env(jira.url)}
    process = popen_bot(
        "ask", "--channel", "CKW", "--approve", "open a ticket", env=env, cwd=tmp_path
    )
    try:
        wait_for(lambda: len(fake_openai.requests) == 2, "the answer after the create")
        process.send_signal(signal.SIGKILL)
        assert process.wait(10) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert jira.created == ["TASK-124"]

    asyncio.run(expire_tickets(database_url, ["CKW"]))
    for api in ("chat", "responses"):
        status, _, err = finish(
            popen_bot(
                "ask",
                "--channel",
                "CKW",
                f"follow-up in {api} mode: did you open it?",
                env={**env, "LLM_API": api},
                cwd=tmp_path,
            )
        )
        assert status == 0, err
        request = fake_openai.requests[-1]
        assert request.status == 200 and request.api == api
        assert "TASK-124" in json.dumps(request.body)  # the model is told what was done
    messages, turns = stored(database_url, "CKW")
    assert_paired(messages)
    assert [m.role for m in messages] == ["user", "assistant", "tool"] + ["user", "assistant"] * 2
    assert [t.outcome for t in turns] == ["interrupted", "answered", "answered"]
    assert jira.created == ["TASK-124"] and len(jira.calls("POST", r"/issue$")) == 1
