"""Threads: the conversation around a question, as the core keeps it. A shell that knows
threads (Slack) gathers a thread's messages into ``Incoming.context``; the turn's question
shows those the history does not hold (bot.agent.memory), and here the stored ones follow
Slack's deletions and edits. It also knows whom the bot answered in which thread (their
replies there are follow-ups, where the channel has them) and people's display names."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from bot.agent.channels import Channels
from bot.agent.tokens import count_message
from bot.context import Context
from bot.messages import Message
from bot.store.threads import ThreadStore


class Threads:
    """Every method raises StoreError when the database fails. ``follow_ups``: FOLLOW_UPS,
    what a channel whose ``channels`` settings do not say has."""

    def __init__(
        self, store: ThreadStore, channels: Channels | None = None, follow_ups: bool = True
    ) -> None:
        self.store = store
        self.channels = channels
        self.follow_ups = follow_ups

    async def follow_edit(self, channel_id: str, ts: str, text: str) -> int:
        """A message edited in Slack: the stored questions that show it (or are it) read
        its new ``text``. How many changed."""
        changed = 0
        for message in await self.store.with_context(channel_id):
            context, asked = message.context or Context(), message.asked or ""
            if message.slack_ts != ts and not context.holds(ts):
                continue
            if message.slack_ts == ts:
                asked = text
            lines = tuple(
                replace(line, text=text) if line.ts == ts else line for line in context.lines
            )
            await self._rewrite(channel_id, message, Context(lines, context.left_out), asked)
            changed += 1
        return changed

    async def follow_deletion(self, channel_id: str, ts: str) -> int:
        """A message deleted in Slack leaves the stored questions that showed it. How many
        changed."""
        changed = 0
        for message in await self.store.with_context(channel_id):
            context = message.context
            if context is None or not context.holds(ts):
                continue
            kept = Context(tuple(x for x in context.lines if x.ts != ts), context.left_out)
            await self._rewrite(channel_id, message, kept, message.asked)
            changed += 1
        return changed

    async def _rewrite(
        self, channel_id: str, message: Message, context: Context, asked: str | None
    ) -> None:
        question = asked or ""
        content = context.around(question)
        rewritten = message.with_(content=content, context=context, asked=question)
        await self.store.rewrite(channel_id, rewritten.with_(tokens=count_message(rewritten)))

    async def answered(self, channel_id: str, thread_ts: str, user_id: str) -> None:
        """The bot answered ``user_id`` in that thread: their replies there are follow-ups."""
        await self.store.answered(channel_id, thread_ts, user_id)

    async def follows_up(self, channel_id: str, thread_ts: str, user_id: str) -> bool:
        """Whether a reply without a mention in the thread ``thread_ts`` asks the bot: the
        channel has follow-ups (its own ``follow_ups``, else FOLLOW_UPS) and the bot
        answered ``user_id`` there."""
        follow_ups = None
        if self.channels is not None:
            follow_ups = (await self.channels.settings(channel_id)).follow_ups
        if not (self.follow_ups if follow_ups is None else follow_ups):
            return False
        return await self.store.was_answered(channel_id, thread_ts, user_id)

    async def name_people(self, names: Mapping[str, str]) -> None:
        await self.store.name_people(names)

    async def names(self, user_ids: Iterable[str] | None = None) -> dict[str, str]:
        return await self.store.names(user_ids)
