"""``crm_log_note`` killed between the write and the journal: a ``bot run`` process is
killed (SIGKILL) once Salesforce has stored the Task but before its answer arrives; the
process that goes on with the turn (the next start on SQLite, one running all along on
PostgreSQL) finds the Task by its marker instead of writing it again: one note, one answer."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from tests.crm_fakes import salesforce_settings
from tests.fakes.openai_server import FakeOpenAI, Hang, Reply, Request, ToolUse
from tests.fakes.salesforce_server import FakeSalesforce
from tests.fakes.slack_server import FakeSlack
from tests.reliability.helpers import MANY_PROCESSES, read_session, until
from tests.reliability.test_kill_points import expire_leases, has_results
from tests.scenarios.slack.conftest import Clock, mention
from tests.scenarios.slack.test_processes import BotProcess, process_settings

pytestmark = MANY_PROCESSES

NOTE = "Called Ana: the invoice export is fixed on their side."


@pytest.mark.timeout(180)
async def test_a_note_whose_answer_died_with_the_process_is_written_once(
    database_url: str,
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    salesforce: FakeSalesforce,
    clock: Clock,
    tmp_path: Path,
) -> None:
    (ana,) = [i for i, c in salesforce.records["Contact"].items() if c["Name"] == "Ana Lima"]

    def model(request: Request) -> ToolUse | Reply | Hang:
        if not has_results(request):
            return ToolUse("crm_log_note", {"contact_id": ana, "text": NOTE}, "note")
        items = request.body.get("messages") or request.body.get("input") or []
        result = next(
            json.loads(i.get("content") or i.get("output"))
            for i in items
            if i.get("tool_call_id") == "note" or i.get("call_id") == "note"
        )
        return Reply(text=f"Logged: {result.get('url')} ({result.get('note', 'at once')})")

    fake_openai.responder = model
    before = [t for t in salesforce.tasks if t["Description"] == NOTE]
    # the Task is stored, then its answer is held until the process is dead
    salesforce.hang_next(60, r"/sobjects/Task/?$", method="POST", after=True)
    settings = {
        **process_settings(database_url, fake_slack, fake_openai),
        **salesforce_settings(salesforce),
        "WRITE_APPROVAL": "off",
    }
    postgres = database_url.startswith("postgresql")
    survivor = BotProcess(tmp_path, **settings) if postgres else None
    victim = BotProcess(tmp_path, **settings)
    try:
        await victim.healthy(60)
        if survivor is not None:
            await survivor.healthy(60)
        asked = clock.ts()
        assert await victim.send(mention("CK", asked, "log a note on Ana")) == 200
        await until(
            lambda: len([t for t in salesforce.tasks if t["Description"] == NOTE]) > len(before),
            "the Task stored in Salesforce",
        )
        victim.process.send_signal(signal.SIGKILL)
        victim.process.communicate(timeout=10)
        if survivor is None:
            survivor = BotProcess(tmp_path, **settings)  # the next start takes over
            await survivor.healthy(60)
        else:
            await expire_leases(database_url)
        await until(
            lambda: any(m["text"].startswith("Logged:") for m in fake_slack.messages("CK")),
            "the answer",
            timeout=60,
        )
        status, stderr = await asyncio.to_thread(survivor.finish)
        assert status == 0, stderr
    finally:
        for bot in (victim, survivor):
            if bot is not None and bot.process.poll() is None:
                bot.process.kill()
                bot.process.communicate()

    written = [t for t in salesforce.tasks if t["Description"] == NOTE]
    assert len(written) == len(before) + 1  # written once, never sent again
    assert len(salesforce.calls("POST", r"/sobjects/Task/?$")) == 1
    (answer,) = [m for m in fake_slack.messages("CK") if m["text"].startswith("Logged:")]
    assert answer["thread_ts"] == asked
    assert "/lightning/r/Task/" in answer["text"] and "the note is there" in answer["text"]
    _, turns = await read_session(database_url, "CK")
    assert [t.outcome for t in turns] == ["answered"]
