"""A ``bot run`` killed between each Jira write and its journal: Jira has done the write
(comment, assignment, move, edit, link) and holds its answer back, the journal holds the
call but no result, and the process is killed with SIGKILL. The process that goes on (on
SQLite the next start, on PostgreSQL one running all along, after the lease) finds out from
Jira whether each write was done, by its marker or by reading it back, and never sends it
again: one comment, one transition, one link, one assignment, one edit; each person gets
one answer.

SQLite runs against a Jira Cloud, PostgreSQL against a Server (both kinds of lookup, one
victim process each).
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Hang, Reply, Request, ToolUse
from tests.fakes.slack_server import FakeSlack
from tests.reliability.helpers import (
    MANY_PROCESSES,
    assert_paired,
    last_user_text,
    read_session,
    until,
)
from tests.reliability.test_kill_points import Point, all_done, expire_leases, has_results
from tests.scenarios.slack.conftest import Clock, mention
from tests.scenarios.slack.jira_helpers import jira_env, jira_of, with_people
from tests.scenarios.slack.test_processes import BotProcess, process_settings

pytestmark = MANY_PROCESSES

HANG_S = 60
#: channel -> (question, the write, the request that does it)
WRITES = {
    "JC": (
        "comment, then die",
        ToolUse("jira_add_comment", {"issue_key": "TASK-1", "body": "Still failing."}, "c_JC"),
        ("POST", r"/issue/TASK-1/comment$"),
    ),
    "JA": (
        "assign, then die",
        ToolUse("jira_assign_issue", {"issue_key": "TASK-1", "assignee": "<@UCAROL>"}, "c_JA"),
        ("PUT", r"/issue/TASK-1/assignee$"),
    ),
    "JT": (
        "move, then die",
        ToolUse("jira_transition_issue", {"issue_key": "TASK-2", "status": "In Progress"}, "c_JT"),
        ("POST", r"/issue/TASK-2/transitions$"),
    ),
    "JU": (
        "edit, then die",
        ToolUse("jira_update_issue", {"issue_key": "TASK-3", "priority": "High"}, "c_JU"),
        ("PUT", r"/issue/TASK-3$"),
    ),
    "JL": (
        "link, then die",
        ToolUse(
            "jira_link_issues",
            {"issue_key": "TASK-1", "other_issue_key": "TASK-3", "link_type": "blocks"},
            "c_JL",
        ),
        ("POST", r"/issueLink$"),
    ),
}


@pytest.fixture
def jira(database_url: str) -> Iterator[FakeJira]:
    with jira_of("Server" if database_url.startswith("postgresql") else "Cloud") as fake:
        yield fake


@pytest.mark.timeout(240)
async def test_a_process_killed_after_each_jira_write_leaves_it_done_once(
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    jira: FakeJira,
    clock: Clock,
    tmp_path: Path,
) -> None:
    with_people(fake_slack)
    takeover = threading.Event()
    by_question = {question: (channel, call) for channel, (question, call, _) in WRITES.items()}

    def model(request: Request) -> Reply | ToolUse | Hang:
        channel, call = by_question[last_user_text(request)]
        if not has_results(request):
            return call
        if not takeover.is_set():
            return Hang(HANG_S)  # never: the victim dies before its write answers
        return Reply(text=f"answer in {channel}")

    fake_openai.responder = model
    for method, path in (request for _, _, request in WRITES.values()):
        jira.hang_next(HANG_S, path, method=method, after=True)  # done, the answer held back
    settings = {
        **process_settings(database_url, fake_slack, fake_openai),
        **{k: str(v) for k, v in jira_env(jira).items()},
        "WRITE_APPROVAL": "off",
    }
    postgres = database_url.startswith("postgresql")
    survivor = BotProcess(tmp_path, **settings) if postgres else None
    victim = BotProcess(tmp_path, **settings)
    asked = {channel: clock.ts() for channel in WRITES}
    try:
        await victim.healthy(60)
        if survivor is not None:
            await survivor.healthy(60)
        for channel, (question, _, _) in WRITES.items():
            assert await victim.send(mention(channel, asked[channel], question)) == 200

        def all_sent() -> bool:
            return all(jira.calls(method, path) for _, _, (method, path) in WRITES.values())

        await until(all_sent, "every write reaching Jira", timeout=30)
        victim.process.send_signal(signal.SIGKILL)
        victim.process.communicate(timeout=10)
        takeover.set()
        if survivor is None:
            survivor = BotProcess(tmp_path, **settings)  # the next start takes over
            await survivor.healthy(60)
        else:
            await expire_leases(database_url)

        def answered() -> bool:
            return all(
                any(m["text"] == f"answer in {c}" for m in fake_slack.messages(c)) for c in WRITES
            )

        await until(answered, "every answer", timeout=60)
        await until(
            lambda: all_done(
                database_url, [Point(c, q, ts=asked[c]) for c, (q, *_) in WRITES.items()]
            ),
            "every job done",
            timeout=30,
        )
        status, stderr = await asyncio.to_thread(survivor.finish)
        assert status == 0, stderr
    finally:
        for bot in (survivor, victim):
            if bot is not None and bot.process.poll() is None:
                bot.process.kill()
                bot.process.communicate()

    # each write sent once, and done once
    for _, _, (method, path) in WRITES.values():
        assert len(jira.calls(method, path)) == 1, path
    (comment,) = jira.comments_of("TASK-1")
    assert "From Slack, for Ann Asker:" in json.dumps(comment["body"])
    assert jira.issues["TASK-1"]["assignee"] == "Carol Diaz"
    assert jira.issues["TASK-2"]["status"] == "In Progress"
    assert jira.issues["TASK-3"]["priority"] == "High"
    assert jira.links == [{"type": "Blocks", "inward": "TASK-1", "outward": "TASK-3"}]
    for channel in WRITES:
        shown = [m["text"] for m in fake_slack.messages(channel)]
        assert shown == [f"answer in {channel}"], channel
        messages, turns = await read_session(database_url, channel)
        assert [t.outcome for t in turns] == ["answered"], channel
        assert_paired(messages)
        (result,) = [m for m in messages if m.role == "tool"]
        found = json.loads(result.content or "{}")
        print(f"{jira.deployment} {channel}: {result.name} -> {found}")  # for the report
        assert "the bot restarted" in found.get("note", ""), (channel, found)
