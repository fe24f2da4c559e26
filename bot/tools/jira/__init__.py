"""Jira tools: read an issue, search with JQL, and the writes (create, comment, assign, move,
edit, link), each in an allowed project, approved where writes are, never done twice.

client.py is the connection (auth, retries, errors), tools.py the reads and the create
(create.py: its fields, its recovery by marker label), write.py what the other writes share
and one module each (comment.py, assign.py, transition.py, update.py, link.py), users.py
the people (who asked, who is assigned), markup.py Markdown as Jira takes it.
"""

from __future__ import annotations

from bot.config import JiraSettings
from bot.people import People
from bot.tools.base import ToolRegistry
from bot.tools.jira.assign import JiraAssign
from bot.tools.jira.client import JiraConnection
from bot.tools.jira.comment import JiraComments
from bot.tools.jira.link import JiraLinks
from bot.tools.jira.tools import JiraTools, jira_tools
from bot.tools.jira.transition import JiraTransitions
from bot.tools.jira.update import JiraUpdates
from bot.tools.jira.write import JiraWrite

__all__ = ["JiraConnection", "JiraTools", "add_jira_tools", "jira_tools", "jira_writes"]

SOURCE = "Jira"


def jira_writes(jira: JiraTools) -> list[JiraWrite]:
    """The writes on existing issues, sharing ``jira``'s connection and people."""
    kinds: list[type[JiraWrite]] = [
        JiraComments,
        JiraAssign,
        JiraTransitions,
        JiraUpdates,
        JiraLinks,
    ]
    return [kind(jira, jira.users) for kind in kinds]


def add_jira_tools(
    registry: ToolRegistry, settings: JiraSettings, time_limit: float, people: People
) -> None:
    """Offer the Jira tools when JIRA_URL is set; with JIRA_READ_ONLY on, the reads alone."""
    jira = jira_tools(settings, time_limit, people=people)
    if jira is None:
        return
    registry.add_object(jira, source=SOURCE)
    if settings.JIRA_READ_ONLY:
        for entry in registry.tools():
            if entry.source == SOURCE and entry.writes:
                registry.remove(entry.name)
        return
    for kind in jira_writes(jira):
        registry.add_object(kind, source=SOURCE)
