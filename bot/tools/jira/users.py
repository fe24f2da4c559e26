"""People in Jira: who asked (the person behind a write) and who an issue is assigned to.

The asker is the turn's user (``bot.turn.current_asker``), named by the shell's directory
(``bot.people``: Slack's ``users.info``). A person of the chat is matched to a Jira user by
email (Jira's user search: Cloud ``query=``, Server ``username=``); a name, among the
people an issue can be assigned to (``user/assignable/search``). What Jira says of an email
is kept a few minutes (bounded), so a turn that writes nothing asks nothing of Jira and a
busy person's writes ask once.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from bot.errors import ToolError
from bot.people import People, Person
from bot.tools.jira.client import JiraConnection
from bot.tools.jira.errors import trim
from bot.turn import current_asker

#: emails whose Jira user (or that none has it) is kept, and for how long
USERS_KEPT = 1_000
USERS_FOR_S = 300.0
#: people a name is looked for among, at most
CANDIDATES = 20
MENTION = re.compile(r"^<@([UW][A-Z0-9]+)(?:\|[^>]*)?>$")
EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+$")
#: what a write made from the command line says of whose it was
FROM_COMMAND_LINE = "From the bot's command line:"


@dataclass(frozen=True)
class JiraUser:
    """A Jira user: ``id`` is the account id on Cloud, the user name on Server."""

    id: str
    name: str
    email: str | None = None

    def reference(self, cloud: bool) -> dict[str, str]:
        """How a request names the user."""
        return {"accountId": self.id} if cloud else {"name": self.id}

    @classmethod
    def of(cls, data: Any) -> JiraUser | None:
        if not isinstance(data, dict) or not data.get("active", True):
            return None
        user_id = data.get("accountId") or data.get("name") or data.get("key")
        if not isinstance(user_id, str) or not user_id:
            return None
        name = trim(data.get("displayName") or user_id, 100) or user_id
        email = data.get("emailAddress")
        return cls(user_id, name, email if isinstance(email, str) and email else None)


def credit(person: Person | None) -> str:
    """The first line of what a write says in Jira on someone's behalf."""
    if person is None:
        return FROM_COMMAND_LINE
    return f"From Slack, for {person.called}:"


class JiraUsers:
    """Jira's people as the write tools need them; thread-safe (the tools run in threads)."""

    def __init__(self, jira: JiraConnection, people: People | None = None) -> None:
        self.jira = jira
        self.people = people or People()
        # speed device: see bench/README.md, "people and link types kept"
        self._by_email: TTLCache[str, JiraUser | None] = TTLCache(USERS_KEPT, USERS_FOR_S)
        self._lock = threading.Lock()

    async def asker(self) -> Person | None:
        """Who asked the turn this tool runs for (None outside one, or from ``bot ask``
        without ``--user``)."""
        user_id = current_asker()
        return await self.people.person(user_id) if user_id else None

    def by_email(self, email: str) -> JiraUser | None:
        """The active Jira user with ``email`` (kept a few minutes, as is that none has it).
        Blocking: call it in the tool's thread."""
        wanted = email.strip().casefold()
        with self._lock:
            if wanted in self._by_email:
                return self._by_email[wanted]
        param = "query" if self.jira.cloud else "username"
        found = self.jira.call(
            lambda: self.jira.rest("GET", "user/search", params={param: wanted, "maxResults": 10}),
            action="search Jira's users",
            bad_request="user search",
        )
        users = [u for u in map(JiraUser.of, found or []) if u is not None]
        # Cloud hides an email its owner keeps private: one user found by it is that user
        exact = [u for u in users if (u.email or "").casefold() == wanted]
        user = exact[0] if len(exact) == 1 else users[0] if len(users) == 1 else None
        with self._lock:
            self._by_email[wanted] = user
        return user

    async def of_person(self, person: Person) -> JiraUser | None:
        """The Jira user with the person's email (None: Slack gave none, or nobody has it)."""
        if not person.email:
            return None
        email = person.email
        return await self.jira.blocking(lambda: self.by_email(email))

    async def assignee(self, key: str, wanted: str) -> JiraUser:
        """The one Jira user ``wanted`` names for ``key``: a Slack mention (matched by the
        email Slack gives), an email, or a name among the issue's assignable users. A
        ToolError lists the candidates when none or several match."""
        text = wanted.strip()
        mention = MENTION.match(text)
        if mention:
            person = await self.people.person(mention.group(1))
            if not person.email:
                raise ToolError(
                    f"Slack does not give {person.called}'s email, so they cannot be matched "
                    "to a Jira user. Ask for their email or their name in Jira. Nothing "
                    "was changed."
                )
            user = await self.of_person(person)
            if user is None:
                raise ToolError(
                    f"No Jira user has {person.called}'s email ({person.email}). Ask for "
                    "their name in Jira. Nothing was changed."
                )
            return user
        if EMAIL.match(text):
            user = await self.jira.blocking(lambda: self.by_email(text))
            if user is None:
                raise ToolError(f"No Jira user has the email {text}. Nothing was changed.")
            return user
        return await self.jira.blocking(lambda: self._by_name(key, text))

    def _by_name(self, key: str, name: str) -> JiraUser:
        if not name:
            raise ToolError("Say whom to assign the issue to.")
        param = "query" if self.jira.cloud else "username"
        found = self.jira.call(
            lambda: self.jira.rest(
                "GET",
                "user/assignable/search",
                params={"issueKey": key, param: name, "maxResults": CANDIDATES},
            ),
            action=f"look up who can be assigned {key}",
            bad_request="user search",
        )
        users = [u for u in map(JiraUser.of, found or []) if u is not None]
        exact = [u for u in users if " ".join(u.name.split()).casefold() == name.casefold()]
        if len(exact) == 1 or len(users) == 1:
            return (exact or users)[0]
        if not users:
            raise ToolError(
                f"Nobody named '{name[:60]}' can be assigned {key}. Nothing was changed."
            )
        listed = "; ".join(f"{u.name}" + (f" ({u.email})" if u.email else "") for u in users)
        raise ToolError(
            f"Several people named '{name[:60]}' can be assigned {key}: {listed}. Ask which "
            "one (a Slack mention or an email is exact). Nothing was changed."
        )
