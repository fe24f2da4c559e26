"""The inbox's notes and ends, written together when they come together (group commit)."""

from __future__ import annotations

import asyncio

from bot.jobs import Job
from bot.jobs.inbox import Inbox
from bot.store.db import create_engines


def job(channel: str) -> Job:
    return Job(channel=channel, key="1.000001", kind="question", payload={"q": channel})


async def test_notes_and_ends_that_come_together_each_reach_their_own_job(
    database_url: str,
) -> None:
    """Jobs noted at once, and others ended at once, one of each another process's -> each
    of this process's jobs has its own note (as whoever takes it over reads it) and its own
    status; the other process's jobs are left as they were."""
    engines = create_engines(database_url)
    mine, theirs, successor = Inbox(engines), Inbox(engines), Inbox(engines)
    try:
        a, b, o, d, f, p = (job(c) for c in ("CA", "CB", "CO", "CD", "CF", "CP"))
        for inbox, each in ((mine, a), (mine, b), (theirs, o), (mine, d), (mine, f), (theirs, p)):
            await inbox.add(each, None)
        await asyncio.gather(*(mine.note(j, {"step_ts": j.channel}) for j in (a, b, o)))
        await asyncio.gather(
            mine.finish(d, done=True), mine.finish(f, done=False), mine.finish(p, done=True)
        )
        statuses = [await mine.status(j.channel, j.key) for j in (d, f, p)]
        notes = {j.channel: j.notes for j in await successor.left_over()}
    finally:
        await engines.dispose()

    assert statuses == ["done", "failed", "queued"]
    assert notes == {"CA": {"step_ts": "CA"}, "CB": {"step_ts": "CB"}, "CO": {}, "CP": {}}
