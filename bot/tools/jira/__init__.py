"""Jira tools: read an issue, search with JQL, create an issue in an allowed project.

client.py is the connection (auth, retries, errors), tools.py the tools, create.py the
create's fields and its recovery by marker label.
"""

from __future__ import annotations

from bot.tools.jira.client import JiraConnection
from bot.tools.jira.tools import JiraTools, jira_tools

__all__ = ["JiraConnection", "JiraTools", "jira_tools"]
