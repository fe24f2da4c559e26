"""Sessions: the stored conversations as people review and forget them, the one API the
admin pages and ``bot history`` share (documents from bot.documents, rows from the store);
and what people said of the answers (their feedback)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from bot.documents import (
    ExportFormat,
    SettingsByChannel,
    export_lines,
    export_turn_lines,
    session_document,
)
from bot.messages import Message, SessionSummary, Summary
from bot.store.channels import ChannelSettingsStore
from bot.store.feedback import FeedbackStore
from bot.store.history import HistoryStore
from bot.store.summaries import SummaryStore
from bot.store.threads import ThreadStore
from bot.turn import TurnState


class Sessions:
    """Every method raises StoreError when the database fails."""

    def __init__(self, history: HistoryStore) -> None:
        self._history = history
        self._feedback = FeedbackStore(history.engines)
        self._channels = ChannelSettingsStore(history.engines)
        self._threads = ThreadStore(history.engines, history.windows)
        self._summaries = SummaryStore(history.engines)

    async def summaries(self) -> list[SessionSummary]:
        """Every session, most recently active first."""
        return await self._history.list_sessions()

    async def with_text(self, text: str) -> set[str]:
        """The channels with a message containing ``text``."""
        return await self._history.channels_with_text(text)

    async def exists(self, channel_id: str) -> bool:
        return await self._history.has_channel(channel_id)

    async def read(self, channel_id: str) -> tuple[list[Message], list[TurnState]]:
        """One session's messages and turns, in order."""
        return await self._history.messages(channel_id), await self._history.turns(channel_id)

    async def memory(self, channel_id: str) -> list[Summary]:
        """The summaries of what fell out of the channel's window, oldest first."""
        return await self._summaries.summaries(channel_id)

    async def names(self, messages: list[Message], turns: list[TurnState]) -> dict[str, str]:
        """The display names Slack gave for the people of these messages and turns."""
        people = {m.user_id for m in messages} | {t.user_id for t in turns}
        return await self._threads.names(p for p in people if p)

    async def document(self, channel_id: str) -> dict[str, Any]:
        """The ``history show --json`` document (the channel's own settings included)."""
        messages, turns = await self.read(channel_id)
        settings = await self._channels.get(channel_id)
        summaries = await self.memory(channel_id)
        return session_document(channel_id, messages, turns, settings, summaries)

    async def export(
        self, channel_id: str | None, export_format: ExportFormat, *, turns: bool = False
    ) -> AsyncIterator[str]:
        """Every stored message (with ``turns``: every recorded turn) of one channel, or all,
        as export lines, streamed, each with its channel's own settings."""
        settings = await self._settings_by_channel(channel_id)
        if turns:
            lines = export_turn_lines(self._history.iter_turns(channel_id), export_format, settings)
        else:
            lines = export_lines(self._history.iter_messages(channel_id), export_format, settings)
        async for line in lines:
            yield line

    async def _settings_by_channel(self, channel_id: str | None) -> SettingsByChannel:
        """The own settings of one channel, or of every channel that has some (read once,
        before an export streams)."""
        if channel_id is not None:
            return {channel_id: await self._channels.get(channel_id)}
        return await self._channels.all()

    async def delete(self, channel_id: str) -> int:
        """Forget one session; how many messages went."""
        return await self._history.delete_channel(channel_id)

    async def purge(self, older_than: datetime) -> int:
        """Retention: forget messages older than ``older_than``; how many went."""
        return await self._history.purge(older_than)

    async def name(self, channel_id: str, name: str) -> None:
        """Remember the channel's name (Slack's), for the sessions list."""
        await self._history.set_channel_name(channel_id, name)

    async def give_feedback(self, turn_id: int, channel_id: str, user_id: str, value: str) -> bool:
        """``user_id``'s verdict (positive or negative) on the answer of turn ``turn_id``
        in ``channel_id``, replacing theirs before; False when there is no such turn."""
        return await self._feedback.record(turn_id, channel_id, user_id, value)

    async def ping(self) -> bool:
        """Whether the database answers."""
        return await self._history.ping()
