"""Channels: each channel's own settings as the core reads them and admins change them,
the one API that ``bot channels``, the admin pages and the Slack shell share.

Nothing is cached: a turn reads its channel's row once (one read by its primary key), so a
change made by any process applies from the channel's next turn, with no restart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.channels import (
    ChannelSettings,
    SettingChange,
    channel_document,
    checked_all,
    unmatched,
)
from bot.store.channels import ChannelSettingsStore


@dataclass(frozen=True)
class Changed:
    """A change applied: the channel's settings after it, and what it should warn of."""

    values: dict[str, str]
    warnings: list[str]


class Channels:
    """Every method raises StoreError when the database fails."""

    def __init__(
        self,
        store: ChannelSettingsStore,
        allowed_projects: Sequence[str],
        tool_names: Callable[[], Iterable[str]] = list,
    ) -> None:
        self.store = store
        #: JIRA_ALLOWED_PROJECTS (or JIRA_PROJECT): what ``jira_project`` may be
        self.allowed_projects = list(allowed_projects)
        #: the tools known now (a ``tools`` pattern matching none of them is warned of)
        self.tool_names = tool_names

    async def settings(self, channel_id: str) -> ChannelSettings:
        """What the channel's turn reads of its settings."""
        return ChannelSettings.of(await self.store.get(channel_id))

    async def values(self, channel_id: str) -> dict[str, str]:
        return await self.store.get(channel_id)

    async def changes(self, channel_id: str) -> list[SettingChange]:
        return await self.store.changes(channel_id)

    async def document(self, channel_id: str) -> dict[str, Any]:
        """``bot channels show --json``: the settings and every change of them."""
        values = await self.store.get(channel_id)
        return channel_document(channel_id, values, await self.store.changes(channel_id))

    async def documents(self) -> list[dict[str, Any]]:
        """``bot channels list --json``: every channel with a setting."""
        everything = await self.store.all()
        return [channel_document(channel, values) for channel, values in everything.items()]

    async def change(self, channel_id: str, changes: Mapping[str, object], by: str) -> Changed:
        """Check every change (BadChannelSetting names the first bad one, and nothing is
        applied), then apply them all at once, recorded as ``by``'s."""
        good = checked_all(changes, self.allowed_projects)
        values = await self.store.change(channel_id, good, by)
        missing = unmatched(good.get("tools"), self.tool_names())
        warnings = [f"tools pattern {p!r} matches no tool offered now" for p in missing]
        return Changed(values, warnings)
