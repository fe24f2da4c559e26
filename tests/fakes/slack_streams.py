"""Slack's streaming methods for the fake Slack (chat.startStream / appendStream / stopStream),
as strict as Slack: a stream is a reply in a thread (``thread_ts``), in a channel it names
the person it is for (``recipient_user_id`` and ``recipient_team_id``), each call's chunks
are checked and recorded in order, and once stopped (or expired) the stream takes nothing
more (``message_not_in_streaming_state``). The text of one streamed message is at most
12,000 characters of Markdown (``msg_too_long``).

Scripted trouble: ``refuse_stream_after = N`` lets each stream take N calls (its start
included); the next append or stop finds it expired, as Slack's streams do after a few
minutes. What happened: ``streams(channel)``, each with its ``chunks`` and ``tasks``.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.slack_requests import SlackError

MAX_STREAM_TEXT = 12_000
MAX_TASK_TITLE = 256
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
CHUNK_TYPES = frozenset({"markdown_text", "task_update", "plan_update", "blocks"})
DISPLAY_MODES = frozenset({"timeline", "plan"})


class StreamMethods:
    """Mixed into FakeSlack: its lock is held by the caller; ``_new_message`` makes the
    bot's message, ``_find``/``_require_channel`` look one up, and
    ``_check_blocks_and_metadata`` checks those as chat.postMessage does."""

    refuse_stream_after: int | None = None
    _messages: dict[str, list[dict[str, Any]]]

    def streams(self, channel: str) -> list[dict[str, Any]]:
        """The streamed messages of ``channel``, oldest first: ts, thread_ts, recipients,
        ``chunks`` in the order Slack got them, ``tasks`` (each task's latest state by id),
        ``streaming`` (still open) and ``text``."""
        with self._lock:  # type: ignore[attr-defined]
            found = [m for m in self._messages.get(channel, []) if "_chunks" in m]
            return [
                {
                    "ts": m["ts"],
                    "thread_ts": m["thread_ts"],
                    "recipient_user_id": m.get("_recipient_user_id"),
                    "recipient_team_id": m.get("_recipient_team_id"),
                    "task_display_mode": m.get("_task_display_mode"),
                    "chunks": [dict(c) for c in m["_chunks"]],
                    "tasks": _tasks(m["_chunks"]),
                    "streaming": m["_streaming"],
                    "text": m["text"],
                    "metadata": m.get("metadata"),
                    "blocks": m.get("blocks"),
                }
                for m in found
            ]

    def _start_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._require_channel(args)  # type: ignore[attr-defined]
        if not args.get("thread_ts") or not isinstance(args["thread_ts"], str):
            raise SlackError("invalid_arguments", "missing required field: thread_ts")
        if not channel.startswith("D"):  # a channel: the stream is for one person
            for field in ("recipient_user_id", "recipient_team_id"):
                if not args.get(field):
                    raise SlackError(f"missing_{field}")
        mode = args.get("task_display_mode")
        if mode is not None and mode not in DISPLAY_MODES:
            raise SlackError("invalid_arguments", "task_display_mode must be timeline or plan")
        chunks = _chunks(args)
        message = self._new_message(  # type: ignore[attr-defined]
            channel, {"thread_ts": args["thread_ts"], "text": ""}
        )
        message.update(
            _streaming=True,
            streaming=True,
            _chunks=[],
            _calls=0,
            _recipient_user_id=args.get("recipient_user_id"),
            _recipient_team_id=args.get("recipient_team_id"),
            _task_display_mode=mode,
        )
        _take(message, chunks)
        return {"channel": channel, "ts": message["ts"]}

    def _append_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, message = self._streaming_message(args)
        chunks = _chunks(args)
        if not chunks:
            raise SlackError("invalid_arguments", "missing required field: markdown_text")
        _take(message, chunks)
        return {"channel": channel, "ts": message["ts"]}

    def _stop_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, message = self._streaming_message(args)
        chunks = _chunks(args)
        self._check_blocks_and_metadata(args)  # type: ignore[attr-defined]
        _take(message, chunks)
        for field in ("blocks", "metadata"):
            if field in args:
                message[field] = args[field]
        message["_streaming"] = message["streaming"] = False
        return {"channel": channel, "ts": message["ts"], "message": self._message_response(message)}  # type: ignore[attr-defined]

    def _streaming_message(self, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        channel = self._require_channel(args)  # type: ignore[attr-defined]
        message = self._find(channel, args.get("ts"))  # type: ignore[attr-defined]
        limit = self.refuse_stream_after
        if message.get("_streaming") and limit is not None and message["_calls"] >= limit:
            message["_streaming"] = message["streaming"] = False  # it expired
        if not message.get("_streaming"):
            raise SlackError("message_not_in_streaming_state")
        return channel, message


def _chunks(args: dict[str, Any]) -> list[dict[str, Any]]:
    """The call's content as chunks (``markdown_text`` is one markdown chunk), checked."""
    chunks: list[dict[str, Any]] = []
    text = args.get("markdown_text")
    if text is not None:
        if not isinstance(text, str):
            raise SlackError("invalid_arguments", "markdown_text must be a string")
        chunks.append({"type": "markdown_text", "text": text})
    given = args.get("chunks")
    if given is None:
        return chunks
    if not isinstance(given, list):
        raise SlackError("invalid_chunks", "chunks must be an array")
    for chunk in given:
        _check_chunk(chunk)
    return chunks + given


def _check_chunk(chunk: Any) -> None:
    if not isinstance(chunk, dict) or chunk.get("type") not in CHUNK_TYPES:
        raise SlackError("invalid_chunks", f"unknown chunk {chunk!r}")
    kind = chunk["type"]
    if kind == "markdown_text" and not isinstance(chunk.get("text"), str):
        raise SlackError("invalid_chunks", "a markdown_text chunk needs its text")
    if kind == "task_update":
        title = chunk.get("title")
        if not chunk.get("id") or not isinstance(title, str) or not title.strip():
            raise SlackError("invalid_chunks", "a task_update chunk needs an id and a title")
        if len(title) > MAX_TASK_TITLE:
            raise SlackError("invalid_chunks", "a task title is at most 256 characters")
        if chunk.get("status") not in TASK_STATUSES:
            raise SlackError("invalid_chunks", f"unknown task status {chunk.get('status')!r}")


def _take(message: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
    """One accepted call: its chunks are the message's now."""
    text = "".join(c["text"] for c in chunks if c["type"] == "markdown_text")
    if len(message["text"]) + len(text) > MAX_STREAM_TEXT:
        raise SlackError("msg_too_long")
    message["text"] += text
    message["_chunks"].extend(chunks)
    message["_calls"] += 1


def _tasks(chunks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    tasks: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        if chunk["type"] == "task_update":
            tasks[chunk["id"]] = {**tasks.get(chunk["id"], {}), **chunk}
    return tasks
