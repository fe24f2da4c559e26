"""The people a turn acts for: who asked (``bot.turn.current_asker``), and what the shell
that brought the question knows of them (``People``: a Slack user id -> name and email).

The core knows nothing of Slack: a shell registers its ``Directory`` at start-up (the Slack
shell's reads ``users.info``); without one (``bot ask``, ``bot chat``) a person is known by
their id alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Person:
    """Someone of the chat: their id there, and their name and email when known."""

    user_id: str
    name: str | None = None
    email: str | None = None

    @property
    def called(self) -> str:
        """How to name them to others: their name, else their id."""
        return self.name or f"Slack user {self.user_id}"


class Directory(Protocol):
    """Where a shell looks people up."""

    async def person(self, user_id: str) -> Person:
        """``user_id``'s name and email (either None when the shell cannot say)."""
        ...


class People:
    """The port the tools ask about people; a shell plugs its directory in with ``use``."""

    def __init__(self) -> None:
        self._directory: Directory | None = None

    def use(self, directory: Directory | None) -> None:
        self._directory = directory

    async def person(self, user_id: str) -> Person:
        """What the shell's directory says of ``user_id`` (the id alone without one)."""
        if self._directory is None:
            return Person(user_id)
        return await self._directory.person(user_id)
