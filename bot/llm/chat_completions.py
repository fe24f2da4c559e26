"""Neutral messages <-> Chat Completions (``tool_calls`` / role ``tool``)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from typing import Any

import openai

from bot.llm.base import (
    ModelOptions,
    TextSink,
    UnreadableReply,
    count,
    model_errors,
    stream_events,
    take,
    with_files,
)
from bot.messages import Message, ModelReply, ToolCall, ToolSpec, Usage


class ChatCompletionsModel:
    """A ChatModel over ``POST /chat/completions``."""

    api = "chat"

    def __init__(
        self, client: openai.AsyncOpenAI, model: str, options: ModelOptions | None = None
    ) -> None:
        self.client = client
        self.model = model
        self.options = options or ModelOptions()

    # Requests go through ``client.post`` rather than ``chat.completions.create``: the
    # latter walks every message through its TypedDict transform, several milliseconds of
    # CPU per request for a full history window, and our payload is already plain JSON.
    # The reply is read as plain JSON too (``cast_to=object``): building the typed models
    # costs more CPU than the rest of the request. Retries, time-outs and error types are
    # the client's own either way.

    async def complete(
        self,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text: TextSink | None = None,
    ) -> ModelReply:
        request: dict[str, Any] = {"model": self.model, "messages": to_wire(system, messages)}
        if tools:
            request["tools"] = [tool_to_wire(t) for t in tools]
        if self.options.temperature is not None:
            request["temperature"] = self.options.temperature
        if self.options.reasoning_effort is not None:
            request["reasoning_effort"] = self.options.reasoning_effort
        if self.options.max_output_tokens is not None:
            # max_tokens is deprecated, and refused by reasoning models
            request["max_completion_tokens"] = self.options.max_output_tokens
        with model_errors(self.api):
            if on_text is not None:
                return await self._stream(request, on_text)
            return _reply(await self.client.post("/chat/completions", body=request, cast_to=object))

    async def _stream(self, request: dict[str, Any], on_text: TextSink) -> ModelReply:
        reply = _StreamedReply()
        body = {**request, "stream_options": {"include_usage": True}}
        async with aclosing(stream_events(self.client, "/chat/completions", body)) as chunks:
            async for chunk in chunks:
                text = reply.add(chunk)
                if text:
                    await on_text(text)
        return reply.done()


def _reply(response: object) -> ModelReply:
    """A ModelReply from a chat completion, as JSON."""
    choices = take(response, "choices", list, "the reply")
    if not choices:
        raise UnreadableReply("the reply has no choices")
    choice = choices[0]
    message = take(choice, "message", dict, "choices[0]")
    calls = tuple(
        _call(c, f"message.tool_calls[{i}]")
        for i, c in enumerate(take(message, "tool_calls", list, "message", required=False) or ())
        if not isinstance(c, dict) or c.get("type", "function") == "function"
    )
    usage = take(response, "usage", dict, "the reply", required=False)
    return ModelReply(
        content=take(message, "content", str, "message", required=False),
        tool_calls=calls,
        usage=Usage(count(usage, "prompt_tokens"), count(usage, "completion_tokens")),
        finish=take(choice, "finish_reason", str, "choices[0]", required=False) or "stop",
    )


def _call(call: object, where: str) -> ToolCall:
    function = take(call, "function", dict, where)
    arguments = take(function, "arguments", str, f"{where}.function", required=False)
    name = take(function, "name", str, f"{where}.function")
    return ToolCall(take(call, "id", str, where), name, arguments or "")


class _StreamedReply:
    """A reply put together from streamed chunks (as JSON)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish = "stop"
        self.usage = Usage()

    def add(self, chunk: object) -> str | None:
        """Take one chunk in; its piece of answer text, if any."""
        usage = take(chunk, "usage", dict, "a chunk", required=False)
        if usage:
            self.usage = Usage(count(usage, "prompt_tokens"), count(usage, "completion_tokens"))
        choices = take(chunk, "choices", list, "a chunk", required=False)
        if not choices:
            return None
        choice = choices[0]
        delta = take(choice, "delta", dict, "a chunk's choice")
        for part in take(delta, "tool_calls", list, "a delta", required=False) or ():
            self._add_call(part)
        finish = take(choice, "finish_reason", str, "a chunk's choice", required=False)
        self.finish = finish or self.finish
        content = take(delta, "content", str, "a delta", required=False)
        if content:
            self.text.append(content)
        return content

    def _add_call(self, part: object) -> None:
        where = "a tool call delta"
        call = self.calls.setdefault(
            take(part, "index", int, where), {"id": "", "name": "", "arguments": ""}
        )
        call["id"] = take(part, "id", str, where, required=False) or call["id"]
        function = take(part, "function", dict, where, required=False) or {}
        call["name"] = take(function, "name", str, where, required=False) or call["name"]
        call["arguments"] += take(function, "arguments", str, where, required=False) or ""

    def done(self) -> ModelReply:
        return ModelReply(
            content="".join(self.text) or None,
            tool_calls=tuple(ToolCall(**self.calls[i]) for i in sorted(self.calls)),
            usage=self.usage,
            finish=self.finish,
        )


def to_wire(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for message in messages:
        if message.role == "tool":
            wire.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "content": message.content or "",
                }
            )
        elif message.role == "assistant" and message.tool_calls:
            wire.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in message.tool_calls
                    ],
                }
            )
        elif message.attachments:
            text, images = with_files(message)
            image_parts = [{"type": "image_url", "image_url": {"url": url}} for url in images]
            parts = [{"type": "text", "text": text}, *image_parts]
            wire.append({"role": message.role, "content": parts})
        else:
            wire.append({"role": message.role, "content": message.content or ""})
    return wire


def tool_to_wire(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }
