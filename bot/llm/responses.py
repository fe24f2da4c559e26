"""Neutral messages <-> the Responses API (``function_call`` / ``function_call_output``).

The history is kept locally and replayed whole (``store=False``), so no server-side state
(``previous_response_id``) can expire under us. A reasoning model's reasoning items come
with their encrypted content (``include``), and a round that called tools is sent back
within the turn as the model gave it (``Message.replay``): each reasoning item right before
the item it led to, so the model keeps its reasoning between tool rounds. Nothing of it is
stored: a turn that goes on after a pause or a crash, and every later turn, send the calls
without their item ids, which the API takes without the reasoning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import aclosing
from typing import Any

import openai

from bot.errors import ModelError
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

log = logging.getLogger(__name__)

#: what a reasoning model's reply must carry for its reasoning to be sent back
ENCRYPTED = "reasoning.encrypted_content"
#: the output items sent back as they were; others (none are asked for) are not
_REPLAYED = ("reasoning", "message", "function_call")


class ResponsesModel:
    """A ChatModel over ``POST /responses``."""

    api = "responses"

    def __init__(
        self, client: openai.AsyncOpenAI, model: str, options: ModelOptions | None = None
    ) -> None:
        self.client = client
        self.model = model
        self.options = options or ModelOptions()
        #: asked for until the server says the model has none (it does not reason)
        self.encrypted_reasoning = True

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
        if self.options.temperature is not None:
            request["temperature"] = self.options.temperature
        if self.options.reasoning_effort is not None:
            request["reasoning"] = {"effort": self.options.reasoning_effort}
        if self.options.max_output_tokens is not None:
            request["max_output_tokens"] = self.options.max_output_tokens
        with model_errors(self.api):
            if not self.encrypted_reasoning:
                return await self._send(request, on_text)
            try:
                return await self._send({**request, "include": [ENCRYPTED]}, on_text)
            except openai.BadRequestError as exc:
                if exc.param != "include":
                    raise
            # a model that does not reason refuses the include: once, for the process
            log.info("model %s has no encrypted reasoning; not asking for it again", self.model)
            self.encrypted_reasoning = False
            return await self._send(request, on_text)

    async def _send(self, request: dict[str, Any], on_text: TextSink | None) -> ModelReply:
        if on_text is not None:
            return _reply(await self._stream(request, on_text))
        # plain JSON both ways through client.post: see ChatCompletionsModel for why
        return _reply(await self.client.post("/responses", body=request, cast_to=object))

    async def _stream(self, request: dict[str, Any], on_text: TextSink) -> object:
        """Stream the text to ``on_text``; the finished response, as JSON."""
        async with aclosing(stream_events(self.client, "/responses", request)) as events:
            async for event in events:
                kind = take(event, "type", str, "a streamed event")
                if kind == "response.output_text.delta":
                    await on_text(take(event, "delta", str, "a text delta"))
                elif kind in _FINAL_EVENTS:
                    return take(event, "response", dict, kind)
                elif kind == "error":
                    raise _failed(event)
        raise UnreadableReply("the stream ended before the response was complete")


#: the events that carry the whole response when it is over
_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


def _failed(error: object) -> ModelError:
    """The server gave up on the response (a ``failed`` status or an ``error`` event)."""
    code = error.get("code") if isinstance(error, dict) else None
    log.warning("the model server failed the response (%s)", code or "no code")
    return ModelError("The model server had an error. Please try again in a minute.", kind="server")


def _reply(response: object) -> ModelReply:
    """A ModelReply from a Responses API response, as JSON."""
    status = take(response, "status", str, "the reply", required=False)
    if status == "failed":
        raise _failed(take(response, "error", dict, "the reply", required=False))
    text: list[str] = []
    calls: list[ToolCall] = []
    output = take(response, "output", list, "the reply")
    for i, item in enumerate(output):
        where = f"output[{i}]"
        kind = take(item, "type", str, where)
        if kind == "message":
            for j, part in enumerate(take(item, "content", list, where, required=False) or ()):
                if take(part, "type", str, f"{where}.content[{j}]") == "output_text":
                    text.append(take(part, "text", str, f"{where}.content[{j}]"))
        elif kind == "function_call":
            call_id, name = take(item, "call_id", str, where), take(item, "name", str, where)
            arguments = take(item, "arguments", str, where, required=False) or ""
            calls.append(ToolCall(call_id, name, arguments))
    finish = "tool_calls" if calls else "stop"
    if status == "incomplete":
        details = take(response, "incomplete_details", dict, "the reply", required=False) or {}
        finish = "content_filter" if details.get("reason") == "content_filter" else "length"
    usage = take(response, "usage", dict, "the reply", required=False)
    return ModelReply(
        content="".join(text) or None,
        tool_calls=tuple(calls),
        usage=Usage(count(usage, "input_tokens"), count(usage, "output_tokens")),
        finish=finish,
        replay=_replay(output) if calls else (),
    )


def _replay(output: list[Any]) -> tuple[dict[str, Any], ...]:
    """The output to send back as it is: when it has reasoning, every reasoning item with
    its encrypted content (one without cannot be sent back under ``store=False``)."""
    reasoning = [item for item in output if item["type"] == "reasoning"]
    if not reasoning or not all(isinstance(r.get("encrypted_content"), str) for r in reasoning):
        return ()
    return tuple(item for item in output if item["type"] in _REPLAYED)


def to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    # a message item names its type, which the API leaves optional: servers that translate
    # the Responses API to their own (llama.cpp's) refuse an assistant message without it
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
        if message.replay:
            items.extend(message.replay)
            continue
        if message.attachments:
            text, images = with_files(message)
            parts = [{"type": "input_text", "text": text}]
            parts += [{"type": "input_image", "image_url": u, "detail": "auto"} for u in images]
            items.append({"type": "message", "role": message.role, "content": parts})
        elif message.content or not message.tool_calls:
            items.append(
                {"type": "message", "role": message.role, "content": message.content or ""}
            )
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
