"""The ChatModel protocol the loop depends on, and the OpenAI error mapping both API
modes share."""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, overload

import openai

from bot.errors import ModelError, ModelTimeout
from bot.messages import Message, ModelReply, ToolSpec

log = logging.getLogger(__name__)

#: receives each piece of answer text as the model writes it (streamed answers)
TextSink = Callable[[str], Awaitable[None]]

T = TypeVar("T")


@dataclass(frozen=True)
class ModelOptions:
    """What a request asks of the model beyond the conversation; None: the server's default."""

    temperature: float | None = None
    reasoning_effort: str | None = None
    #: the most tokens one reply may use (a reasoning model's reasoning included)
    max_output_tokens: int | None = None


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


def with_files(message: Message) -> tuple[str, list[str]]:
    """A person's message with the files that came with it, as a request carries it: its
    text followed by the files' texts (contents or notes), and its images as data URLs."""
    texts = [message.content or "", *(a.text for a in message.attachments if a.text)]
    images = [
        f"data:{a.mimetype};base64,{base64.b64encode(a.image).decode('ascii')}"
        for a in message.attachments
        if a.image is not None
    ]
    return "\n\n".join(text for text in texts if text), images


class UnreadableReply(Exception):
    """A reply that is not what the API promises (no ``choices``, a wrong type, ...); the
    message says what, for the log."""


@overload
def take(value: object, key: str, kind: type[T], where: str) -> T: ...
@overload
def take(value: object, key: str, kind: type[T], where: str, *, required: bool) -> T | None: ...


def take(value: object, key: str, kind: type[T], where: str, *, required: bool = True) -> T | None:
    """``value[key]``, checked to be a ``kind`` (None allowed when not ``required``)."""
    if not isinstance(value, dict):
        raise UnreadableReply(f"{where} is {_what(value)}, not an object")
    found = value.get(key)
    if found is None and not required:
        return None
    if not isinstance(found, kind) or (isinstance(found, bool) and kind is not bool):
        raise UnreadableReply(f"{where}.{key} is {_what(found)}, not {kind.__name__}")
    return found


def count(value: object, key: str) -> int:
    """A token count of a usage object; what is missing or not a count is 0."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) else 0


async def stream_events(
    client: openai.AsyncOpenAI, path: str, body: dict[str, Any]
) -> AsyncGenerator[object, None]:
    """POST ``body`` with ``stream`` on; its events as JSON, read as they come (one that is
    not JSON is an UnreadableReply). Use it under ``contextlib.aclosing``."""
    stream = await client.post(
        path,
        body={**body, "stream": True},
        cast_to=object,
        stream=True,
        stream_cls=openai.AsyncStream[object],
    )
    async with stream:
        events = aiter(stream)
        while True:
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
            except ValueError as exc:  # the SDK's json.loads of the event
                raise UnreadableReply(f"a streamed event is not JSON ({exc})") from None
            yield event


@contextlib.contextmanager
def model_errors(api: str) -> Iterator[None]:
    """Turn what a request to the model server raised into the ModelError to show."""
    try:
        yield
    except openai.OpenAIError as exc:
        raise model_error(exc, api) from exc
    except UnreadableReply as exc:
        raise bad_reply(api, str(exc)) from None


def bad_reply(api: str, problem: str) -> ModelError:
    log.error(
        "the model server's reply could not be read (%s); check that OPENAI_BASE_URL is an "
        "OpenAI-compatible server and that it serves LLM_API=%s",
        problem[:300],
        api,
    )
    return ModelError(
        "The model server sent a reply the bot cannot read. Please try again; if it keeps "
        "happening, tell an admin.",
        kind="bad_reply",
    )


def _what(value: Any) -> str:
    return "missing" if value is None else type(value).__name__


def model_error(exc: openai.OpenAIError, api: str = "chat") -> ModelError:
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
        if isinstance(exc, openai.NotFoundError) and api == "responses" and _about_path(exc):
            log.error(
                "the model server has no Responses API (404 for /responses): set LLM_API=chat"
            )
            return ModelError(
                "The model server does not offer the Responses API. Please tell an admin to "
                "set LLM_API=chat.",
                kind="no_responses_api",
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
    error = body.get("error", body)
    return error.get("code") or error.get("type") if isinstance(error, dict) else None


def _about_path(exc: openai.APIStatusError) -> bool:
    """A 404 about the path (no /responses), not about the model (OPENAI_MODEL unknown) nor
    an input item (an id the API has not stored)."""
    body = str(exc.body).lower()
    about_model = _error_code(exc) == "model_not_found" or "model" in body
    return not about_model and "item with id" not in body
