"""Token counts: exact for ordinary text, bounded estimates past the tokenizer's limits."""

from __future__ import annotations

import pytest

from bot.agent import tokens
from bot.agent.conversations import Incoming
from bot.agent.tokens import MESSAGE_OVERHEAD, count_message, count_text
from bot.messages import Message, ToolCall
from tests.fakes.openai_server import FakeOpenAI
from tests.stored_turns import history


def test_ordinary_text_is_counted_exactly() -> None:
    assert count_text("hello world") == 2
    assert count_text("") == count_text(None) == 0


@pytest.mark.parametrize(
    "text",
    [
        "word " * 240_000,  # 1.2 MB: the tokenizer refuses 1,000,000 characters
        "é" * 250_000,  # 250,000 tokens: past the tokenizer's 200,000-token limit
    ],
    ids=["1.2 MB of English", "250,000 accented letters"],
)
def test_text_past_the_tokenizer_limits_is_estimated(text: str) -> None:
    counted = count_text(text)
    # a quarter of the UTF-8 size: about what English costs, never nothing
    assert counted == -(-len(text.encode()) // 4)


def test_the_estimate_starts_where_exact_counting_stops() -> None:
    below = "word " * (tokens.ESTIMATE_FROM_CHARS // 5)
    above = below + "word "
    assert len(above) > tokens.ESTIMATE_FROM_CHARS >= len(below)
    # English costs about four characters a token either way: no jump at the limit
    assert abs(count_text(above) - count_text(below)) <= len(below) // 10


def test_many_tokens_in_few_characters_are_counted() -> None:
    # 240,000 tokens in 60,000 characters: past the tokenizer's limit, below the estimate's
    assert count_text("\U00010348" * 60_000) == 240_000


def test_special_token_text_is_plain_text() -> None:
    # a person may paste a model's control token into Slack; it is only text to us
    assert count_text("see <|endoftext|> here") > 0


def test_a_lone_surrogate_is_counted() -> None:
    # JSON can carry one ("\ud800"); it must not stop the turn
    assert count_text("broken \ud800 text") == count_text("broken ? text")


def test_counts_are_the_packaged_encoding_s() -> None:
    import bpe_openai

    encoding = bpe_openai.get_encoding("o200k_base")
    for text in ("hello world", "Zürich ✓ 東京 🙂", "def f(x):\n    return x * 2\n", "a" * 5000):
        assert count_text(text) == len(encoding.encode_ordinary(text))


def test_a_huge_tool_call_is_counted() -> None:
    call = ToolCall("call_1", "store_document", '{"text": "' + "x" * 2_000_000 + '"}')
    message = Message(role="assistant", content=None, tool_calls=(call,))
    assert count_message(message) > 2_000_000 // 4 + 2 * MESSAGE_OVERHEAD


async def test_a_megabyte_message_is_answered(make_services, fake_openai: FakeOpenAI) -> None:
    """1.2 MB in one message -> counted (estimated), sent, answered and stored."""
    services = make_services()
    fake_openai.script("That is a lot of text.")
    reply = await services.conversations.ask(Incoming("C1", "word " * 240_000, "U1"))
    assert reply.ok and reply.text == "That is a lot of text."
    (user, _answer) = await history(services).messages("C1")
    assert user.tokens == MESSAGE_OVERHEAD + 300_000
