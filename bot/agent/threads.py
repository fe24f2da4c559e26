"""Threads: the conversation around a question, as the core keeps it. A shell that knows
threads (Slack) gathers a thread's messages into ``Incoming.context``; here they are cut to
what the stored history does not hold already and to the token budget, and they follow
Slack's deletions and edits once stored. It also knows whom the bot answered in which
thread (their replies there are follow-ups) and people's display names."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from bot.agent.tokens import count_message, count_text, fits
from bot.context import Context, ContextLine
from bot.messages import Message
from bot.store.threads import Shown, ThreadStore


class Threads:
    """Every method raises StoreError when the database fails."""

    def __init__(self, store: ThreadStore, budget: int) -> None:
        self.store = store
        #: most tokens of a thread's messages shown with a question (0: none)
        self.budget = budget

    def shown(self, context: Context, message: Callable[[Context], Message]) -> Shown | None:
        """What a question asked in a thread shows, for the store to make its message with
        (``message``, of the context cut) as its turn begins; None when it shows nothing."""
        if self.budget <= 0 or not context.lines:
            return None
        ts = tuple(line.ts for line in context.lines)
        return Shown(ts, lambda held: message(self.cut(context, held)))

    def cut(self, context: Context, held: set[str]) -> Context:
        """Of a thread's messages (oldest first), those the channel's stored history does
        not hold (``held``: their ts), the newest that fit the budget."""
        lines = [line for line in context.lines if line.ts not in held]
        rendered = [line.render() for line in lines]
        if fits("\n\n".join(rendered), self.budget):  # the common case
            return Context(tuple(lines), context.left_out)
        kept: list[ContextLine] = []
        tokens = 0
        for line, text in zip(reversed(lines), reversed(rendered), strict=True):
            tokens += count_text(text)
            if tokens > self.budget:
                break
            kept.append(line)
        left_out = context.left_out + len(lines) - len(kept)
        return Context(tuple(reversed(kept)), left_out)

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

    async def was_answered(self, channel_id: str, thread_ts: str, user_id: str) -> bool:
        return await self.store.was_answered(channel_id, thread_ts, user_id)

    async def name_people(self, names: Mapping[str, str]) -> None:
        await self.store.name_people(names)

    async def names(self, user_ids: Iterable[str] | None = None) -> dict[str, str]:
        return await self.store.names(user_ids)


def question_with(question: str, context: Context) -> Message:
    """The person's message of a turn: the question, with the thread's messages before it."""
    if not context:
        return Message.user(question)
    return Message.user(context.around(question)).with_(context=context, asked=question)
