"""The built-in tool: the current date and time, so the loop is useful without Jira."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.errors import ToolError
from bot.tools.tool import tool


@tool(progress="Checking the date and time")
def get_current_time(timezone: str = "UTC") -> dict[str, str]:
    """Get the current date, time and weekday.

    Args:
        timezone: an IANA time zone name such as "Europe/Paris"; UTC when omitted.
    """
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"Unknown time zone '{timezone}'. Use an IANA name like 'Europe/Paris'."
        ) from None
    now = datetime.now(zone)
    return {
        "datetime": now.isoformat(timespec="seconds"),
        "weekday": now.strftime("%A"),
        "timezone": timezone,
    }
