"""Errors the bot raises on purpose. ``str(err)`` is always safe to show a user.

BotError
 +-- SettingsError    a setting is missing or malformed (exit status 2)
 +-- AccessRevoked    Slack refuses the bot's token for good (exit status 3)
 +-- ModelError       the model server failed; ``user_message`` is what the user reads
 |    +-- ModelTimeout
 |    +-- TurnRefused  the model was not asked: a limit of the bot's (bot.agent.limits)
 +-- ToolError        a tool failed; its text becomes the call's ``{"error": ...}`` result
 +-- StoreError       the database failed
"""


class BotError(Exception):
    """Base of every error the bot raises on purpose."""


class SettingsError(BotError):
    """A setting the command needs is missing or malformed."""


class AccessRevoked(BotError):
    """Slack refuses a token of the bot (mistyped, revoked, the app uninstalled, the account
    deactivated): restarting will not help until an admin fixes it."""


class ModelError(BotError):
    """The model server could not produce an answer."""

    def __init__(self, message: str, *, kind: str = "error") -> None:
        super().__init__(message)
        #: a short machine label: "rate_limited", "quota", "auth", "timeout", "bad_request", ...
        self.kind = kind


class ModelTimeout(ModelError):
    """The model did not answer in time."""

    def __init__(self, message: str = "The model did not answer in time.") -> None:
        super().__init__(message, kind="timeout")


class TurnRefused(ModelError):
    """The turn was not sent to the model: the person asked too often, or the process has
    too many requests in flight. The message is the polite reply."""


class ToolError(BotError):
    """A tool could not do its work; the message is what the model reads."""


class StoreError(BotError):
    """The database could not be read or written."""
