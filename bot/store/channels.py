"""ChannelSettingsStore: each channel's own settings (bot.channels) and the record of
their changes.

A turn reads its channel's row by its key (one indexed read); nothing is cached here, so a
change made by any process is what the channel's next turn reads.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.channels import SettingChange
from bot.messages import utcnow
from bot.store.db import Engines, insert_for, store_errors
from bot.store.models import ChannelSettingChangeRow, ChannelSettingsRow

SETTINGS = ChannelSettingsRow.__table__
CHANGES = ChannelSettingChangeRow.__table__


class ChannelSettingsStore:
    """Raises StoreError when the database fails."""

    def __init__(self, engines: Engines | AsyncEngine) -> None:
        self.engines = Engines.of(engines)
        self._insert = insert_for(self.engines.dialect)

    @store_errors
    async def get(self, channel_id: str) -> dict[str, str]:
        """The channel's settings as set (empty: none)."""
        query = select(SETTINGS.c.settings).where(SETTINGS.c.channel_id == channel_id)
        async with self.engines.reads.connect() as connection:
            return dict(await connection.scalar(query) or {})

    @store_errors
    async def all(self) -> dict[str, dict[str, str]]:
        """Every channel with a setting, by channel ID, in ID order."""
        query = select(SETTINGS.c.channel_id, SETTINGS.c.settings).order_by(SETTINGS.c.channel_id)
        async with self.engines.reads.connect() as connection:
            rows = (await connection.execute(query)).all()
        return {row.channel_id: dict(row.settings) for row in rows if row.settings}

    @store_errors
    async def changes(self, channel_id: str) -> list[SettingChange]:
        """The channel's changes, oldest first."""
        query = select(CHANGES).where(CHANGES.c.channel_id == channel_id).order_by(CHANGES.c.id)
        async with self.engines.reads.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [SettingChange(r.key, r.value, r.by, r.at) for r in rows]

    @store_errors
    async def change(
        self, channel_id: str, changes: Mapping[str, str | None], by: str
    ) -> dict[str, str]:
        """Set (or, with None, unset) each key, and record each change, in one transaction;
        the channel's settings after it."""
        now = utcnow()
        create = self._insert(SETTINGS).values(channel_id=channel_id, settings={}, updated_at=now)
        create = create.on_conflict_do_nothing(index_elements=["channel_id"])
        locked = (
            select(SETTINGS.c.settings).where(SETTINGS.c.channel_id == channel_id).with_for_update()
        )

        def work(connection: Connection) -> dict[str, str]:
            connection.execute(create)
            settings = dict(connection.scalar(locked) or {})
            for key, value in changes.items():
                if value is None:
                    settings.pop(key, None)
                else:
                    settings[key] = value
            connection.execute(
                update(SETTINGS)
                .where(SETTINGS.c.channel_id == channel_id)
                .values(settings=settings, updated_at=now)
            )
            if changes:
                connection.execute(
                    CHANGES.insert(),
                    [
                        {"channel_id": channel_id, "key": k, "value": v, "by": by, "at": now}
                        for k, v in changes.items()
                    ],
                )
            return settings

        return await self.engines.transaction(work)
