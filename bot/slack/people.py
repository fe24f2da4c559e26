"""The Slack shell's directory of people (``bot.people.Directory``): a user's name and
email from ``users.info`` (the email needs the ``users:read.email`` scope), kept a few
minutes. Asked only by a write that says whose request it was; the names it learns are
stored (``remember``), so the admin pages and ``bot history show`` name the asker."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import aiohttp
from cachetools import TTLCache
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import StoreError
from bot.people import Person

log = logging.getLogger(__name__)

#: people kept, and for how long
PEOPLE_KEPT = 1_000
PEOPLE_FOR_S = 300.0


class SlackPeople:
    """People as Slack knows them."""

    def __init__(
        self,
        client: AsyncWebClient,
        remember: Callable[[Mapping[str, str]], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.remember = remember
        # speed device: see bench/README.md, "people and link types kept"
        self._known: TTLCache[str, Person] = TTLCache(PEOPLE_KEPT, PEOPLE_FOR_S)

    async def person(self, user_id: str) -> Person:
        known = self._known.get(user_id)
        if known is not None:
            return known
        try:
            info = await self.client.users_info(user=user_id)
        except SlackApiError as exc:  # named by the id alone this time
            log.warning("could not look up %s (%s)", user_id, exc.response.get("error"))
            return Person(user_id)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not look up %s (%s)", user_id, type(exc).__name__)
            return Person(user_id)
        user = info.get("user") or {}
        profile = user.get("profile") or {}
        name = profile.get("real_name") or profile.get("display_name") or user.get("name")
        email = profile.get("email")
        person = Person(
            user_id,
            name if isinstance(name, str) and name else None,
            email if isinstance(email, str) and email else None,
        )
        self._known[user_id] = person
        if person.name and self.remember is not None:
            try:
                await self.remember({user_id: person.name})
            except StoreError:
                log.warning("could not store the name of %s", user_id)
        return person
