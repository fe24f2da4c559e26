"""Conversations: one turn of a channel's session, from the incoming message to the
stored answer. Every shell (Slack, CLI) goes through ``handle``."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from bot.agent.loop import Loop, ProgressSink
from bot.agent.tokens import count_message
from bot.agent.window import select_window
from bot.errors import StoreError
from bot.llm.base import TextSink
from bot.messages import Message, TurnRecord
from bot.store.history import HistoryStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Incoming:
    """A message for the bot, from whichever shell received it."""

    channel_id: str
    text: str
    user_id: str | None = None
    slack_ts: str | None = None


@dataclass(frozen=True)
class Reply:
    """What the shell shows: the answer, or a short message saying what went wrong."""

    text: str
    ok: bool
    outcome: str
    turn_id: int | None = None


STORE_FAILED = "I could not reach my database, so I did not answer. Please try again shortly."


class Conversations:
    """Runs turns: the channel's lock, its history window, the loop, and storage."""

    def __init__(self, store: HistoryStore, loop: Loop, token_budget: int) -> None:
        self.store = store
        self.loop = loop
        self.token_budget = token_budget

    async def handle(
        self,
        incoming: Incoming,
        *,
        on_progress: ProgressSink | None = None,
        on_text: TextSink | None = None,
    ) -> Reply:
        """Answer one message. Never raises for model or tool failures; a database failure
        becomes a failed Reply too."""
        try:
            async with self.store.channel_lock(incoming.channel_id, order_key=incoming.slack_ts):
                return await self._turn(incoming, on_progress, on_text)
        except (SQLAlchemyError, OSError, StoreError):
            log.exception("turn in %s failed on the database", incoming.channel_id)
            return Reply(STORE_FAILED, ok=False, outcome="error")

    async def _turn(
        self, incoming: Incoming, on_progress: ProgressSink | None, on_text: TextSink | None
    ) -> Reply:
        started = time.perf_counter()
        channel = incoming.channel_id
        stored = await self.store.recent_messages(channel, self.token_budget)
        history = select_window(stored, self.token_budget)
        user = Message.user(incoming.text, user_id=incoming.user_id, slack_ts=incoming.slack_ts)
        user = user.with_(tokens=count_message(user))
        record = TurnRecord(
            channel_id=channel,
            user_id=incoming.user_id,
            slack_ts=incoming.slack_ts,
            model=self.loop.model.model,
            api_mode=self.loop.model.api,
        )
        turn_id, user = await self.store.begin_turn(record, user)
        result = await self.loop.run(history, user, on_progress=on_progress, on_text=on_text)
        if result.error and result.error.kind == "context_length" and not result.messages:
            # the estimate was too generous for this model: once more with a quarter of it
            log.warning("context length exceeded in %s; retrying with less history", channel)
            history = select_window(stored, self.token_budget // 4)
            result = await self.loop.run(history, user, on_progress=on_progress, on_text=on_text)
        record.rounds = result.rounds
        record.tools_called = result.tools_called
        record.outcome = result.outcome  # type: ignore[assignment]
        record.input_tokens = result.usage.input_tokens
        record.output_tokens = result.usage.output_tokens
        record.latency_ms = round((time.perf_counter() - started) * 1000)
        if result.error is not None:
            record.error = f"{result.error.kind}: {result.error}"
        await self.store.finish_turn(turn_id, record, result.messages)
        log.info(
            "turn %s in %s: %s, %d rounds, %d+%d tokens, %d ms",
            turn_id,
            channel,
            record.outcome,
            record.rounds,
            record.input_tokens,
            record.output_tokens,
            record.latency_ms,
        )
        if result.error is not None:
            return Reply(str(result.error), ok=False, outcome="error", turn_id=turn_id)
        return Reply(result.answer or "", ok=True, outcome=result.outcome, turn_id=turn_id)
