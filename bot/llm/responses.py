"""Neutral messages <-> the Responses API (``function_call`` / ``function_call_output``).

The history is kept locally and replayed whole (``store=False``), so no server-side state
(``previous_response_id``) can expire under us.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from bot.llm.base import TextSink, model_error
from bot.messages import Message, ModelReply, ToolCall, ToolSpec, Usage


class ResponsesModel:
    """A ChatModel over ``POST /responses``."""

    api = "responses"

    def __init__(self, client: openai.AsyncOpenAI, model: str) -> None:
        self.client = client
        self.model = model

    async def complete(
        self,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        on_text: TextSink | None = None,
    ) -> ModelReply:
        request: dict[str, Any] = {
            "model": self.model,
            "instructions": system,
            "input": to_wire(messages),
            "store": False,
        }
        if tools:
            request["tools"] = [tool_to_wire(t) for t in tools]
        try:
            if on_text is not None:
                response = await self._stream(request, on_text)
            else:
                # plain JSON both ways through client.post: see ChatCompletionsModel for why
                response = await self.client.post("/responses", body=request, cast_to=object)
        except openai.OpenAIError as exc:
            raise model_error(exc) from exc
        return _reply(response)

    async def _stream(self, request: dict[str, Any], on_text: TextSink) -> dict[str, Any]:
        async with self.client.responses.stream(**request) as stream:
            async for event in stream:
                if event.type == "response.output_text.delta" and event.delta:
                    await on_text(event.delta)
            final = await stream.get_final_response()
        return final.model_dump(mode="json")


def _reply(response: dict[str, Any]) -> ModelReply:
    """A ModelReply from a Responses API response, as JSON."""
    text: list[str] = []
    calls: list[ToolCall] = []
    for item in response.get("output") or ():
        if item.get("type") == "message":
            text.extend(
                part["text"] for part in item.get("content") or () if part["type"] == "output_text"
            )
        elif item.get("type") == "function_call":
            calls.append(ToolCall(item["call_id"], item["name"], item.get("arguments") or ""))
    finish = "tool_calls" if calls else "stop"
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        finish = "content_filter" if reason == "content_filter" else "length"
    usage = response.get("usage") or {}
    return ModelReply(
        content="".join(text) or None,
        tool_calls=tuple(calls),
        usage=Usage(usage.get("input_tokens") or 0, usage.get("output_tokens") or 0),
        finish=finish,
    )


def to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": message.content or "",
                }
            )
            continue
        if message.content or not message.tool_calls:
            items.append({"role": message.role, "content": message.content or ""})
        items.extend(
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
            for c in message.tool_calls
        )
    return items


def tool_to_wire(spec: ToolSpec) -> dict[str, Any]:
    # Responses treats function tools as strict unless told; our optional arguments aren't
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
        "strict": False,
    }
