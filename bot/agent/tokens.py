"""Token estimates for the history window, counted offline (the encodings ship in the
``bpe-openai`` wheel; nothing is downloaded at run time)."""

from __future__ import annotations

from functools import lru_cache

import bpe_openai

from bot.messages import Message

#: per-message framing the APIs add around each message
MESSAGE_OVERHEAD = 4


@lru_cache(maxsize=1)
def _encoding() -> bpe_openai.Encoding:
    return bpe_openai.get_encoding("o200k_base")


def count_text(text: str | None) -> int:
    return len(_encoding().encode(text)) if text else 0


def count_message(message: Message) -> int:
    """The tokens ``message`` costs in a request: its text, its calls and their arguments."""
    total = MESSAGE_OVERHEAD + count_text(message.content)
    for call in message.tool_calls:
        total += MESSAGE_OVERHEAD + count_text(call.name) + count_text(call.arguments)
    return total
