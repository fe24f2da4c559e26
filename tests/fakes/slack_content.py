"""The fake Slack's checks of what a message holds (text, blocks, metadata), with Slack's
limits and errors."""

from __future__ import annotations

from typing import Any

from tests.fakes.slack_requests import SlackError

MAX_TEXT = 40_000
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3_000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2_000
MAX_HEADER_TEXT = 150
MAX_MARKDOWN_TEXT = 12_000


def check_content(args: dict[str, Any], *, required: bool) -> None:
    text = args.get("text")
    if text is not None and not isinstance(text, str):
        raise SlackError("invalid_arguments", "text must be a string")
    if "blocks" in args:
        check_blocks(args["blocks"])
    if required and not text and not args.get("blocks") and not args.get("attachments"):
        raise SlackError("no_text")
    if text and len(text) > MAX_TEXT:
        raise SlackError("msg_too_long")


def check_metadata(args: dict[str, Any]) -> None:
    if "metadata" not in args:
        return
    metadata = args["metadata"]
    if (
        not isinstance(metadata, dict)
        or not isinstance(metadata.get("event_type"), str)
        or not metadata["event_type"]
        or not isinstance(metadata.get("event_payload"), dict)
    ):
        raise SlackError("invalid_metadata_format")


def check_blocks(blocks: Any) -> None:
    if isinstance(blocks, str):
        raise SlackError("invalid_blocks_format")
    if not isinstance(blocks, list):
        raise SlackError("invalid_blocks_format", "blocks must be an array")
    if len(blocks) > MAX_BLOCKS:
        raise SlackError(
            "invalid_blocks", f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"
        )
    for i, block in enumerate(blocks):
        where = f"[json-pointer:/blocks/{i}]"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise SlackError("invalid_blocks", f"missing required field: type {where}")
        kind = block["type"]
        if kind == "section":
            text = block.get("text")
            fields = block.get("fields")
            if text is None and not fields:
                raise SlackError("invalid_blocks", f"must provide text or fields {where}")
            if text is not None:
                _check_text_object(text, MAX_SECTION_TEXT, where + "/text")
            if fields is not None:
                if not isinstance(fields, list) or len(fields) > MAX_SECTION_FIELDS:
                    raise SlackError("invalid_blocks", f"at most 10 fields {where}/fields")
                for j, field in enumerate(fields):
                    _check_text_object(field, MAX_FIELD_TEXT, f"{where}/fields/{j}")
        elif kind == "header":
            _check_text_object(block.get("text"), MAX_HEADER_TEXT, where + "/text", plain=True)
        elif kind == "markdown":
            text = block.get("text")
            if not isinstance(text, str) or not text or len(text) > MAX_MARKDOWN_TEXT:
                raise SlackError("invalid_blocks", f"invalid markdown text {where}/text")
        elif kind in ("context", "actions", "context_actions"):
            elements = block.get("elements")
            limit = _ELEMENT_LIMITS[kind]
            if not isinstance(elements, list) or not elements or len(elements) > limit:
                raise SlackError("invalid_blocks", f"1 to {limit} elements needed {where}")
            if kind == "context_actions":
                for j, element in enumerate(elements):
                    _check_context_action(element, f"{where}/elements/{j}")


_ELEMENT_LIMITS = {"context": 10, "actions": 25, "context_actions": 5}


def _check_context_action(element: Any, where: str) -> None:
    """A context_actions element: feedback_buttons (both buttons, each with a plain text
    of at most 75 characters and a value) or an icon_button."""
    kind = element.get("type") if isinstance(element, dict) else None
    if kind not in ("feedback_buttons", "icon_button"):
        raise SlackError("invalid_blocks", f"unsupported element type [json-pointer:{where}]")
    action_id = element.get("action_id")
    if action_id is not None and (not isinstance(action_id, str) or len(action_id) > 255):
        raise SlackError("invalid_blocks", f"invalid action_id [json-pointer:{where}]")
    if kind != "feedback_buttons":
        return
    for side in ("positive_button", "negative_button"):
        button = element.get(side)
        if not isinstance(button, dict):
            raise SlackError("invalid_blocks", f"missing required field: {side} {where}")
        _check_text_object(button.get("text"), 75, f"{where}/{side}/text", plain=True)
        value = button.get("value")
        if not isinstance(value, str) or not value or len(value) > 2000:
            raise SlackError("invalid_blocks", f"invalid value [json-pointer:{where}/{side}]")


def _check_text_object(obj: Any, limit: int, where: str, *, plain: bool = False) -> None:
    allowed = ("plain_text",) if plain else ("plain_text", "mrkdwn")
    if not isinstance(obj, dict) or obj.get("type") not in allowed:
        raise SlackError("invalid_blocks", f"invalid text object [json-pointer:{where}]")
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        raise SlackError("invalid_blocks", f"missing text [json-pointer:{where}/text]")
    if len(text) > limit:
        raise SlackError(
            "invalid_blocks", f"must be less than {limit + 1} characters [json-pointer:{where}]"
        )
