"""The fake OpenAI server's answers: a scripted Reply as a chat completion, its chunks, a
response, or its stream events, each sent through the `openai` package's model of it
(tests/fakes/openai_types.py)."""

from __future__ import annotations

import json
import math
import secrets
import string
import time
from dataclasses import dataclass
from typing import Any

from tests.fakes.openai_steps import Reply
from tests.fakes.openai_types import ChatCompletion, ChatCompletionChunk, event, sent


def rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def hex_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


def pieces(text: str, n: int = 4) -> list[str]:
    """Split text into about n chunks (as a model streams it)."""
    if not text:
        return []
    size = max(1, math.ceil(len(text) / n))
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class _Call:
    call_id: str
    name: str
    arguments: str
    item_id: str


class Answer:
    """A Reply resolved against one request: ids, arguments and usage fixed."""

    def __init__(self, reply: Reply, raw_body: bytes):
        self.reply = reply
        self.text = reply.text
        self.calls = [
            _Call(
                call_id=call.call_id or f"call_{rand(24)}",
                name=call.name,
                arguments=call.arguments_json(),
                item_id=hex_id("fc"),
            )
            for call in reply.tool_calls
        ]
        self.finish_reason = reply.effective_finish_reason
        if reply.usage is not None:
            self.input_tokens, self.output_tokens = reply.usage
        else:
            self.input_tokens = max(1, len(raw_body) // 4)
            self.output_tokens = max(1, len(self.text or "") // 4 + 10 * len(self.calls))
        self.created = int(time.time())


def _chat_usage(a: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": a.input_tokens,
        "completion_tokens": a.output_tokens,
        "total_tokens": a.input_tokens + a.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def chat_completion(body: dict[str, Any], a: Answer) -> dict[str, Any]:
    content = a.text if a.text is not None else (None if a.calls else "")
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": None,
        "annotations": [],
    }
    if a.calls:
        message["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in a.calls
        ]
    completion = {
        "id": f"chatcmpl-{rand(29)}",
        "object": "chat.completion",
        "created": a.created,
        "model": body["model"],
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": a.finish_reason}
        ],
        "usage": _chat_usage(a),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }
    return sent(ChatCompletion, completion)


def chat_chunks(body: dict[str, Any], a: Answer) -> list[dict[str, Any]]:
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    base: dict[str, Any] = {
        "id": f"chatcmpl-{rand(29)}",
        "object": "chat.completion.chunk",
        "created": a.created,
        "model": body["model"],
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }
    if include_usage:
        base["usage"] = None

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**base, "choices": [choice]}

    first_content = "" if a.text is not None or not a.calls else None
    chunks = [chunk({"role": "assistant", "content": first_content, "refusal": None})]
    chunks += [chunk({"content": piece}) for piece in pieces(a.text or "")]
    for index, c in enumerate(a.calls):
        head = {
            "index": index,
            "id": c.call_id,
            "type": "function",
            "function": {"name": c.name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [head]}))
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in pieces(c.arguments)
        ]
    chunks.append(chunk({}, a.finish_reason))
    if include_usage:
        chunks.append({**base, "choices": [], "usage": _chat_usage(a)})
    return [sent(ChatCompletionChunk, c) for c in chunks]


def _echo_tools(tools: Any) -> list[dict[str, Any]]:
    echoed = []
    for tool in tools or []:
        if tool.get("type") == "function":
            echoed.append(
                {
                    "type": "function",
                    "name": tool["name"],
                    "description": tool.get("description"),
                    "parameters": tool.get("parameters"),
                    "strict": tool.get("strict", True),
                }
            )
        else:
            echoed.append(tool)
    return echoed


def _responses_output(a: Answer, item_status: str) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if a.text is not None or not a.calls:
        output.append(
            {
                "id": hex_id("msg"),
                "type": "message",
                "status": item_status,
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": a.text or "", "annotations": [], "logprobs": []}
                ],
            }
        )
    for c in a.calls:
        output.append(
            {
                "id": c.item_id,
                "type": "function_call",
                "status": "completed",
                "call_id": c.call_id,
                "name": c.name,
                "arguments": c.arguments,
            }
        )
    return output


def response_object(body: dict[str, Any], a: Answer) -> dict[str, Any]:
    incomplete = None
    if a.finish_reason == "length":
        incomplete = {"reason": "max_output_tokens"}
    elif a.finish_reason == "content_filter":
        incomplete = {"reason": "content_filter"}
    status = "incomplete" if incomplete else "completed"
    return {
        "id": hex_id("resp"),
        "object": "response",
        "created_at": a.created,
        "status": status,
        "background": False,
        "completed_at": a.created if status == "completed" else None,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"),
        "model": body["model"],
        "output": _responses_output(a, "incomplete" if incomplete else "completed"),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "prompt_cache_key": body.get("prompt_cache_key"),
        "reasoning": {"effort": None, "summary": None, **(body.get("reasoning") or {})},
        "safety_identifier": body.get("safety_identifier"),
        "service_tier": "default",
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": _echo_tools(body.get("tools")),
        "top_logprobs": body.get("top_logprobs", 0),
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": {
            "input_tokens": a.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": a.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": a.input_tokens + a.output_tokens,
        },
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    def emit(type_: str, **fields: Any) -> None:
        events.append(event({"type": type_, "sequence_number": len(events), **fields}))

    pending = {
        **response,
        "status": "in_progress",
        "completed_at": None,
        "incomplete_details": None,
        "output": [],
        "usage": None,
    }
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        if item["type"] == "reasoning":
            bare = {k: v for k, v in item.items() if k != "encrypted_content"}
            emit("response.output_item.added", output_index=index, item=bare)
        elif item["type"] == "message":
            part = item["content"][0]
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            empty_part = {**part, "text": ""}
            emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=empty_part,
            )
            for piece in pieces(part["text"]):
                emit(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=part["text"],
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
        else:
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for piece in pieces(item["arguments"]):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            )
        emit("response.output_item.done", output_index=index, item=item)
    final = "response.completed" if response["status"] == "completed" else "response.incomplete"
    emit(final, response=response)
    return events


def sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
