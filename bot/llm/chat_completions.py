"""Neutral messages <-> Chat Completions (``tool_calls`` / role ``tool``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from bot.llm.base import TextSink, model_error
from bot.messages import Message, ModelReply, ToolCall, ToolSpec, Usage


class ChatCompletionsModel:
    """A ChatModel over ``POST /chat/completions``."""

    api = "chat"

    def __init__(self, client: openai.AsyncOpenAI, model: str) -> None:
        self.client = client
        self.model = model

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
        try:
            if on_text is not None:
                return await self._stream(request, on_text)
            response = await self.client.post("/chat/completions", body=request, cast_to=object)
        except openai.OpenAIError as exc:
            raise model_error(exc) from exc
        choice = response["choices"][0]
        message = choice["message"]
        calls = tuple(
            ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments") or "")
            for c in message.get("tool_calls") or ()
            if c.get("type") == "function"
        )
        usage = response.get("usage") or {}
        return ModelReply(
            content=message.get("content"),
            tool_calls=calls,
            usage=Usage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0),
            finish=choice.get("finish_reason") or "stop",
        )

    async def _stream(self, request: dict[str, Any], on_text: TextSink) -> ModelReply:
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish = "stop"
        usage = Usage()
        stream = await self.client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
        async for chunk in stream:
            if chunk.usage:
                usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
                await on_text(delta.content)
            for part in delta.tool_calls or ():
                call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                if part.id:
                    call["id"] = part.id
                if part.function and part.function.name:
                    call["name"] = part.function.name
                if part.function and part.function.arguments:
                    call["arguments"] += part.function.arguments
            if choice.finish_reason:
                finish = choice.finish_reason
        return ModelReply(
            content="".join(text) or None,
            tool_calls=tuple(ToolCall(**calls[i]) for i in sorted(calls)),
            usage=usage,
            finish=finish,
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
