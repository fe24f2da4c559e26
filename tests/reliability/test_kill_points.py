"""The kill-point matrix: ``bot run`` killed with SIGKILL at each point of a turn, and
another process going on with what it left: on SQLite the next start, on PostgreSQL a
process that was running all along (it takes the dead one's jobs over).

Each point has a channel and a victim process of its own; the victims are started
together, each gets its question, and each is killed once it is where it should die:

* after the ack; after the question is stored (the model has the request and hangs);
* while a read tool runs (Jira has the GET and hangs);
* while a create is in flight (Jira stores the issue, then holds its answer back);
* after a create's result (the model has the request carrying it, and hangs);
* after the answer is stored (its post hangs at Slack, and never arrives);
* after it is posted (the working reaction's removal hangs).

Then, for each: the person gets exactly one answer in the thread and nothing else (no step
message of the dead process is left), Jira holds exactly one issue per create, the
question is stored once, the stored rounds are not asked of the model again, and the
stored history goes through the strict fake in both API modes.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from bot.jobs.inbox import Inbox
from bot.messages import utcnow
from bot.store.db import create_engine, create_engines
from bot.store.models import ChannelHoldRow, InboxRow
from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Hang, Reply, Request, ToolUse
from tests.fakes.slack_server import FakeSlack
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
    read_session,
    until,
)
from tests.scenarios.slack.conftest import Clock, mention
from tests.scenarios.slack.test_processes import BotProcess, process_settings

pytestmark = MANY_PROCESSES

HANG_S = 60


@dataclass
class Point:
    channel: str
    question: str
    #: the tool the model calls first, if any
    tool: ToolUse | None = None
    #: true once the victim is where it should die
    reached: Callable[[], Any] = lambda: True
    ts: str = ""
    victim: BotProcess | None = field(default=None, repr=False)


def has_results(request: Request) -> bool:
    items = request.body.get("messages") or request.body.get("input") or []
    return any(i.get("role") == "tool" or i.get("type") == "function_call_output" for i in items)


@pytest.fixture
def jira() -> Iterator[FakeJira]:
    with FakeJira(email=JIRA_EMAIL, api_token=JIRA_TOKEN, projects={"TASK": {}}) as fake:
        fake.add_issue("TASK-123", summary="Invoice export fails")
        yield fake


@pytest.mark.timeout(300)
async def test_a_process_killed_at_any_point_leaves_one_answer_and_one_issue(
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    jira: FakeJira,
    clock: Clock,
    tmp_path: Path,
) -> None:
    takeover = threading.Event()  # set once the victims are dead

    def held(method: str, channel: str) -> bool:
        return (method, channel) in fake_slack.held

    create = {"summary": "{} ticket", "description": "Asked in {}."}

    def creates(channel: str) -> list[Any]:
        posted = jira.calls("POST", r"/issue$")
        return [c for c in posted if c.json["fields"]["summary"].startswith(channel)]

    def asked(point: Point, *, with_results: bool) -> int:
        """How often the model was asked ``point``'s question (with a tool's result)."""
        return sum(
            last_user_text(r) == point.question and has_results(r) == with_results
            for r in list(fake_openai.requests)
        )

    async def question_stored() -> bool:
        messages, _ = await read_session(database_url, "KQ")
        return bool(messages)

    def created(channel: str) -> ToolUse:
        arguments = {k: v.format(channel) for k, v in create.items()}
        return ToolUse("jira_create_issue", arguments, f"call_{channel}")

    points = [
        Point("KA", "kill me after the ack"),
        Point("KQ", "kill me once my question is stored", reached=question_stored),
        Point(
            "KR",
            "kill me while the read runs",
            ToolUse("jira_get_issue", {"issue_key": "TASK-123"}, "call_KR"),
            lambda: jira.calls("GET", r"/issue/TASK-123$"),
        ),
        Point("KC", "kill me while the create is in flight", created("KC"), lambda: creates("KC")),
        Point("KT", "kill me after the create's result", created("KT")),
        Point(
            "KS", "kill me once my answer is stored", reached=lambda: held("chat.postMessage", "KS")
        ),
        Point(
            "KP", "kill me once my answer is posted", reached=lambda: held("reactions.remove", "KP")
        ),
    ]
    points[4].reached = lambda: asked(points[4], with_results=True)
    by_question = {p.question: p for p in points}

    def model(request: Request) -> Reply | ToolUse | Hang:
        text = last_user_text(request)
        if text.startswith("follow-up"):
            return Reply(text=f"ok: {text}")
        point = by_question[text]
        if point.tool is not None and not has_results(request):
            return point.tool
        hangs = point.channel in ("KA", "KQ") or (point.channel == "KT" and has_results(request))
        if hangs and not takeover.is_set():
            return Hang(HANG_S)
        return Reply(text=f"answer to {text}")

    fake_openai.responder = model
    jira.hang_next(HANG_S, r"/issue/TASK-123$", method="GET")
    jira.hang_next(HANG_S, r"/issue$", method="POST", after=True)  # KC's create, the first
    fake_slack.hang_next("chat.postMessage", HANG_S, channel="KS")
    fake_slack.hang_next("reactions.remove", HANG_S, channel="KP")
    settings = {
        **process_settings(database_url, fake_slack, fake_openai),
        **jira_env(jira.url),
        "WRITE_APPROVAL": "off",
    }
    postgres = database_url.startswith("postgresql")
    survivor = BotProcess(tmp_path, **settings) if postgres else None
    for point in points:
        point.victim = BotProcess(tmp_path, **settings)
    try:
        await asyncio.gather(*(p.victim.healthy(60) for p in points if p.victim))
        if survivor is not None:
            await survivor.healthy(60)
        for point in points:  # one after another: the Jira hang is the first create's
            point.ts = clock.ts()
            assert point.victim is not None
            assert await point.victim.send(mention(point.channel, point.ts, point.question)) == 200
            await until(point.reached, f"the kill point in {point.channel}", timeout=30)
            point.victim.process.send_signal(signal.SIGKILL)
            point.victim.process.communicate(timeout=10)
        takeover.set()
        if survivor is None:
            survivor = BotProcess(tmp_path, **settings)  # the next start takes over
            await survivor.healthy(60)
        else:
            await expire_leases(database_url)  # LEASE (30 s) passes for the dead processes

        def answered(point: Point) -> bool:
            shown = fake_slack.messages(point.channel)
            return any(m["text"] == f"answer to {point.question}" for m in shown)

        await until(lambda: all(answered(p) for p in points), "every answer", timeout=60)
        await until(lambda: all_done(database_url, points), "every job done", timeout=30)
        status, stderr = await asyncio.to_thread(survivor.finish)
        assert status == 0, stderr
    finally:
        for bot in [survivor, *(p.victim for p in points)]:
            if bot is not None and bot.process.poll() is None:
                bot.process.kill()
                bot.process.communicate()

    for point in points:
        # exactly one answer, in the thread, and nothing else left there (no step message)
        shown = [(m["text"], m["thread_ts"]) for m in fake_slack.messages(point.channel)]
        assert shown == [(f"answer to {point.question}", point.ts)], point.channel
        messages, turns = await read_session(database_url, point.channel)
        assert [m.slack_ts for m in messages if m.role == "user"] == [point.ts], point.channel
        assert [t.outcome for t in turns] == ["answered"], point.channel
        assert_paired(messages)
    for channel in ("KC", "KT"):  # one issue per create, sent once
        assert len(creates(channel)) == 1
        assert sum(i["summary"].startswith(channel) for i in jira.issues.values()) == 1
    # a stored round is not asked of the model again (the first two stored none)
    for point in points[2:]:
        assert asked(point, with_results=False) == 1, point.channel
    for point in points[5:]:  # their answers were stored
        assert asked(point, with_results=True) == 0, point.channel

    # the stored histories go through the strict fake in both API modes
    env = {**bot_env(fake_openai, database_url), **jira_env(jira.url)}
    for api in ("chat", "responses"):
        follow_ups = {p.channel: f"follow-up in {api} mode, {p.channel}" for p in points}
        started = {
            channel: popen_bot(
                "ask", "--channel", channel, text, env={**env, "LLM_API": api}, cwd=tmp_path
            )
            for channel, text in follow_ups.items()
        }
        for point in points:
            status, _, err = await asyncio.to_thread(finish, started[point.channel], 60)
            assert status == 0, err
            follow_up = follow_ups[point.channel]
            (request,) = [r for r in fake_openai.requests if last_user_text(r) == follow_up]
            assert request.status == 200 and request.api == api
            assert point.question in json.dumps(request.body)


async def all_done(database_url: str, points: list[Point]) -> bool:
    engines = create_engines(database_url)
    try:
        inbox = Inbox(engines)
        return all([await inbox.status(p.channel, p.ts) == "done" for p in points])
    finally:
        await engines.dispose()


async def expire_leases(database_url: str) -> None:
    """LEASE passes for the dead processes: their jobs' and channels' leases run out now."""
    past = utcnow() - timedelta(seconds=1)
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                update(InboxRow).where(InboxRow.status == "queued").values(lease_until=past)
            )
            await connection.execute(update(ChannelHoldRow).values(lease_until=past))
    finally:
        await engine.dispose()
