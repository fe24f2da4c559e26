"""The fake OpenAI server's reasoning models (Responses API), strict like the real API.

A reasoning model's output starts with a ``reasoning`` item when the scripted Reply has
``reasoning`` text (the text itself is never sent: the real API sends only an empty
``summary`` unless asked for one). With ``include: ["reasoning.encrypted_content"]`` the
item carries ``encrypted_content``, an opaque token the fake issued; without it, the item
can only be sent back by its id when the response was stored.

What the fake refuses, with the real API's texts:

- ``include`` with ``reasoning.encrypted_content`` for a model that does not reason (400,
  param ``include``);
- a reasoning item sent back without ``encrypted_content`` under ``store: false`` (404,
  the item was never persisted), or with a token the fake did not issue for it (400
  ``invalid_encrypted_content``);
- a reasoning item not followed, at once, by the item it preceded in the output (400
  "... was provided without its required following item.");
- an output item sent back by its id (a ``function_call`` or ``message``) without the
  reasoning item that preceded it in the output before it (400 "... without its required
  'reasoning' item: 'rs_...'.").
"""

from __future__ import annotations

import re
import secrets
import threading
from dataclasses import dataclass
from typing import Any

from tests.fakes.openai_errors import ApiError, invalid_type, invalid_value

#: the OpenAI models that reason (o-series, gpt-5, codex), not their chat variants
_REASONS = re.compile(r"^(o\d|gpt-5|codex)")
INCLUDABLE = [
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
    "reasoning.encrypted_content",
    "message.output_text.logprobs",
]
ENCRYPTED = "reasoning.encrypted_content"


def reasons(model: str) -> bool:
    """Whether ``model`` is a reasoning model (gpt-5-chat-latest is not)."""
    return bool(_REASONS.match(model)) and "-chat" not in model


@dataclass(frozen=True)
class _Issued:
    token: str | None
    stored: bool
    #: the id of the output item right after it
    follower: str | None


class Reasoning:
    """The reasoning items the fake model gave out, and which output items each preceded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued: dict[str, _Issued] = {}
        self._tokens: dict[str, str] = {}  # token -> reasoning item id
        self._led_to: dict[str, str] = {}  # output item id -> its reasoning item id

    def clear(self) -> None:
        with self._lock:
            self._issued.clear()
            self._tokens.clear()
            self._led_to.clear()

    def check_include(self, body: dict[str, Any]) -> None:
        include = body.get("include")
        if include is None:
            return
        if not isinstance(include, list):
            raise invalid_type("include", "an array", include)
        for i, value in enumerate(include):
            if value not in INCLUDABLE:
                raise invalid_value(f"include[{i}]", value, INCLUDABLE)
        if ENCRYPTED in include and not reasons(str(body.get("model"))):
            raise ApiError(
                400, "Encrypted content is not supported with this model.", param="include"
            )

    def think(self, body: dict[str, Any], output: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``output`` as a reasoning model gives it: a reasoning item first (none for a
        model that does not reason)."""
        if not reasons(str(body.get("model"))):
            return output
        item: dict[str, Any] = {"id": f"rs_{secrets.token_hex(24)}", "type": "reasoning"}
        item["summary"] = []
        token = None
        if ENCRYPTED in (body.get("include") or ()):
            token = item["encrypted_content"] = f"gAAAAAB{secrets.token_urlsafe(96)}"
        follower = output[0]["id"] if output else None
        with self._lock:
            self._issued[item["id"]] = _Issued(
                token, body.get("store", True) is not False, follower
            )
            if token is not None:
                self._tokens[token] = item["id"]
            for later in output:
                self._led_to[later["id"]] = item["id"]
        return [item, *output]

    def check_input(self, body: dict[str, Any], items: list[dict[str, Any]]) -> None:
        """The reasoning rules over ``input`` (items validated otherwise already)."""
        stored = body.get("store", True) is not False
        present: set[str] = set()
        for n, item in enumerate(items):
            if item["type"] == "reasoning":
                reasoning_id = self._known(item, f"input[{n}]", stored)
                follower = items[n + 1].get("id") if n + 1 < len(items) else None
                if follower is None or follower != self._issued[reasoning_id].follower:
                    raise ApiError(
                        400,
                        f"Item '{reasoning_id}' of type 'reasoning' was provided without its "
                        "required following item.",
                        param="input",
                    )
                present.add(reasoning_id)
                continue
            with self._lock:
                needed = self._led_to.get(item.get("id") or "")
            if needed is not None and needed not in present:
                raise ApiError(
                    400,
                    f"Item '{item['id']}' of type '{item['type']}' was provided without its "
                    f"required 'reasoning' item: '{needed}'.",
                    param="input",
                )

    def _known(self, item: dict[str, Any], p: str, stored: bool) -> str:
        """The id of the issued reasoning item ``item`` stands for."""
        summary = item.get("summary")
        if summary is None:
            raise ApiError(
                400,
                f"Missing required parameter: '{p}.summary'.",
                param=f"{p}.summary",
                code="missing_required_parameter",
            )
        item_id, token = item.get("id"), item.get("encrypted_content")
        with self._lock:
            if token is not None:
                found = self._tokens.get(token) if isinstance(token, str) else None
                if found is None or item_id not in (None, found):
                    raise ApiError(
                        400,
                        f"The encrypted content for item {item_id or p} could not be verified.",
                        param=None,
                        code="invalid_encrypted_content",
                    )
                return found
            issued = self._issued.get(item_id or "")
        if not stored:
            raise ApiError(
                404,
                f"Item with id '{item_id}' not found. Items are not persisted when `store` is "
                "set to false. Try again with `store` set to true, or remove this item from "
                "your input.",
                param="input",
            )
        if issued is None or not issued.stored:
            raise ApiError(404, f"Item with id '{item_id}' not found.", param="input")
        return str(item_id)
