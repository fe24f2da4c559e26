"""The ChatModel protocol the loop depends on, and the OpenAI error mapping both API
modes share."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import openai

from bot.errors import ModelError, ModelTimeout
from bot.messages import Message, ModelReply, ToolSpec

log = logging.getLogger(__name__)

#: receives each piece of answer text as the model writes it (streamed answers)
TextSink = Callable[[str], Awaitable[None]]


class ChatModel(Protocol):
    """One request to a model: the system message, the conversation, the tools offered.

    An empty ``tools`` means tools are disabled for this request. Raises ModelError.
    """

    model: str
    api: str

    async def complete(
        self,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text: TextSink | None = None,
    ) -> ModelReply: ...


def model_error(exc: openai.OpenAIError) -> ModelError:
    """What went wrong, in words a Slack user can read; no key, URL or body."""
    if isinstance(exc, openai.APITimeoutError):
        return ModelTimeout()
    if isinstance(exc, openai.APIConnectionError):
        return ModelError(
            "The model server could not be reached. Please try again in a minute.",
            kind="connection",
        )
    if isinstance(exc, openai.APIStatusError):
        code = _error_code(exc)
        log.warning("model server answered %s (%s)", exc.status_code, code or "no code")
        if code == "insufficient_quota":
            log.error("the OpenAI account's quota is used up: an admin must act")
            return ModelError(
                "The bot's model quota is used up. Please tell an admin.", kind="quota"
            )
        if isinstance(exc, openai.RateLimitError):
            return ModelError(
                "The model is busy right now. Please try again in a minute.", kind="rate_limited"
            )
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            log.error("the model server refused the bot's credentials (HTTP %s)", exc.status_code)
            return ModelError(
                "The bot cannot use its model (the server refused its "
                "credentials). Please tell an admin.",
                kind="auth",
            )
        if code == "context_length_exceeded":
            return ModelError("The conversation is too long for the model.", kind="context_length")
        if exc.status_code >= 500:
            return ModelError(
                "The model server had an error. Please try again in a minute.", kind="server"
            )
        return ModelError(
            "The model rejected the request. Please tell an admin.", kind="bad_request"
        )
    return ModelError("The model could not answer. Please try again.", kind="error")


def _error_code(exc: openai.APIStatusError) -> str | None:
    code = getattr(exc, "code", None)
    if code:
        return str(code)
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body, dict) else {}
    return error.get("code") or error.get("type") if isinstance(error, dict) else None
