"""Feedback on the admin pages: each turn shows who gave which verdict; the session page
filters the turns that got a thumbs down, the sessions page the sessions that have one."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import text

from bot.agent.sessions import Sessions
from bot.messages import Message
from bot.store.db import create_engine
from bot.store.history import HistoryStore
from tests.stored_turns import add_turn
from tests.web.test_admin_api import TOKEN, serve_admin


def seed(database_url: str) -> None:
    """C1: a liked answer and a disliked one (liked by someone else too); D2: no feedback."""

    async def run() -> None:
        store = HistoryStore(create_engine(database_url))
        sessions = Sessions(store)
        try:
            await add_turn(store, "C1", "first question", [Message.assistant("Liked answer.")])
            await add_turn(store, "C1", "second question", [Message.assistant("Poor answer.")])
            await add_turn(store, "D2", "a DM", [Message.assistant("Unrated answer.")])
            liked, disliked = [turn.id for turn in await store.turns("C1")]
            assert liked is not None and disliked is not None
            assert await sessions.give_feedback(liked, "C1", "U1", "positive")
            assert await sessions.give_feedback(disliked, "C1", "U1", "positive")
            assert await sessions.give_feedback(disliked, "C1", "U1", "negative")  # changed
            assert await sessions.give_feedback(disliked, "C1", "U7", "positive")
            assert not await sessions.give_feedback(liked, "D2", "U1", "negative")
        finally:
            await store.engines.dispose()

    asyncio.run(run())


@pytest.fixture
def bearer(database_url: str) -> Iterator[httpx.Client]:
    seed(database_url)
    with serve_admin(database_url) as app:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=app.url, headers=headers, timeout=10) as http:
            yield http


def test_the_session_page_shows_feedback_and_filters_thumbs_down(bearer: httpx.Client) -> None:
    everything = bearer.get("/admin/sessions/C1").text
    disliked = bearer.get("/admin/sessions/C1?turns=negative").text

    assert "Liked answer." in everything and "Poor answer." in everything
    assert "bad U1" in everything and "good U7" in everything and "good U1" in everything
    assert "Poor answer." in disliked and "Liked answer." not in disliked
    assert "Thumbs down (1)" in disliked
    assert re.search(r'href="[^"]*\?turns=negative" aria-current="page"', disliked)


def test_the_sessions_page_filters_sessions_with_a_thumbs_down(bearer: httpx.Client) -> None:
    everything = bearer.get("/admin/").text
    disliked = bearer.get("/admin/?feedback=negative").text

    assert "/admin/sessions/D2" in everything and "2 good · 1 bad" in everything
    assert "/admin/sessions/C1" in disliked and "/admin/sessions/D2" not in disliked


def test_a_forgotten_session_forgets_its_feedback(bearer: httpx.Client, database_url: str) -> None:
    async def forget_and_count() -> tuple[list[int], int | None]:
        store = HistoryStore(create_engine(database_url))
        try:
            await store.delete_channel("C1")
            async with store.engines.reads.connect() as connection:
                left = await connection.scalar(text("SELECT count(*) FROM feedback"))
            return [s.positive + s.negative for s in await store.list_sessions()], left
        finally:
            await store.engines.dispose()

    assert asyncio.run(forget_and_count()) == ([0], 0)
    assert bearer.get("/admin/api/sessions").json()[0]["feedback"] == {
        "positive": 0,
        "negative": 0,
    }
