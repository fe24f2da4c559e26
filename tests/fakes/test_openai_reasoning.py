"""The fake's reasoning models on the Responses API, driven by the real `openai` client:
the rules the real API enforces for reasoning items."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply, ToolUse

REASONS = "gpt-5-mini"
NOW = {
    "type": "function",
    "name": "now",
    "parameters": {"type": "object", "properties": {}},
    "strict": False,
}
QUESTION = {"role": "user", "content": "What time is it?"}
ENCRYPTED = ["reasoning.encrypted_content"]


async def first_round(
    openai_client: openai.AsyncOpenAI, fake_openai: FakeOpenAI, **options: Any
) -> list:
    """A reasoning model's tool round under store=false: its output items, as JSON."""
    fake_openai.script(
        Reply(reasoning="look at the clock", tool_calls=[ToolUse("now", {}, "call_1")])
    )
    response = await openai_client.responses.create(
        model=options.pop("model", REASONS),
        input=[QUESTION],
        tools=[NOW],  # type: ignore[list-item]
        store=False,
        **options,
    )
    return [item.model_dump(exclude_none=True) for item in response.output]


def answered(call_id: str = "call_1") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "noon"}


async def next_round(openai_client: openai.AsyncOpenAI, items: list) -> Any:
    return await openai_client.responses.create(
        model=REASONS,
        input=[QUESTION, *items],
        tools=[NOW],  # type: ignore[list-item]
        store=False,
        include=ENCRYPTED,  # type: ignore[list-item]
    )


async def test_reasoning_replayed_in_place_is_accepted(
    fake_openai: FakeOpenAI, openai_client
) -> None:
    output = await first_round(openai_client, fake_openai, include=ENCRYPTED)
    reasoning, call = output
    assert reasoning["type"] == "reasoning" and reasoning["summary"] == []
    assert reasoning["id"].startswith("rs_") and reasoning["encrypted_content"].startswith("gAAA")
    assert call["type"] == "function_call" and call["id"].startswith("fc_")
    fake_openai.script(Reply(text="It is noon."))

    response = await next_round(openai_client, [*output, answered()])

    assert response.output_text == "It is noon."
    # without their ids the calls need no reasoning (what a model without it is sent)
    fake_openai.script(Reply(text="It is noon."))
    bare = {k: v for k, v in call.items() if k not in ("id", "status")}
    assert (await next_round(openai_client, [bare, answered()])).output_text == "It is noon."


async def test_streamed_reasoning_item_carries_its_encrypted_content(
    fake_openai: FakeOpenAI, openai_client
) -> None:
    fake_openai.script(Reply(reasoning="think", text="Noon."))
    stream = await openai_client.responses.create(
        model=REASONS, input=[QUESTION], store=False, include=ENCRYPTED, stream=True
    )  # type: ignore[call-overload]
    events = [event async for event in stream]
    added = [e.item for e in events if e.type == "response.output_item.added"]
    assert added[0].type == "reasoning" and added[0].encrypted_content is None
    final = events[-1].response
    assert final.output[0].encrypted_content and final.output_text == "Noon."


async def test_reasoning_without_its_following_item_is_refused(
    fake_openai: FakeOpenAI, openai_client
) -> None:
    reasoning, call = await first_round(openai_client, fake_openai, include=ENCRYPTED)
    with pytest.raises(openai.BadRequestError) as refused:
        await next_round(openai_client, [reasoning])
    assert refused.value.body["message"] == (
        f"Item '{reasoning['id']}' of type 'reasoning' was provided without its required "
        "following item."
    )
    assert refused.value.param == "input"
    bare = {k: v for k, v in call.items() if k != "id"}
    with pytest.raises(openai.BadRequestError, match="without its required following item"):
        await next_round(openai_client, [reasoning, bare, answered()])


async def test_call_without_its_reasoning_is_refused(
    fake_openai: FakeOpenAI, openai_client
) -> None:
    reasoning, call = await first_round(openai_client, fake_openai, include=ENCRYPTED)
    with pytest.raises(openai.BadRequestError) as refused:
        await next_round(openai_client, [call, answered()])
    assert refused.value.body["message"] == (
        f"Item '{call['id']}' of type 'function_call' was provided without its required "
        f"'reasoning' item: '{reasoning['id']}'."
    )


async def test_encrypted_content_must_come_back_unchanged(
    fake_openai: FakeOpenAI, openai_client
) -> None:
    reasoning, call = await first_round(openai_client, fake_openai, include=ENCRYPTED)
    changed = {**reasoning, "encrypted_content": reasoning["encrypted_content"][:-4] + "AAAA"}
    with pytest.raises(openai.BadRequestError) as refused:
        await next_round(openai_client, [changed, call, answered()])
    assert refused.value.code == "invalid_encrypted_content"
    assert "could not be verified" in refused.value.body["message"]


async def test_reasoning_without_encrypted_content_is_not_found_under_store_false(
    fake_openai: FakeOpenAI, openai_client
) -> None:
    """Not asked for the encrypted content: the item has only its id, which store=false
    never kept."""
    reasoning, call = await first_round(openai_client, fake_openai)
    assert "encrypted_content" not in reasoning
    with pytest.raises(openai.NotFoundError) as refused:
        await next_round(openai_client, [reasoning, call, answered()])
    assert refused.value.body["message"].startswith(f"Item with id '{reasoning['id']}' not found.")
    assert "store` is set to false" in refused.value.body["message"]


async def test_a_model_that_does_not_reason_refuses_the_include(
    fake_openai: FakeOpenAI, openai_client
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await first_round(openai_client, fake_openai, include=ENCRYPTED, model="gpt-4o")
    assert refused.value.body["message"] == "Encrypted content is not supported with this model."
    assert refused.value.param == "include"
    # and it gives no reasoning item, asked or not
    assert [
        item["type"] for item in await first_round(openai_client, fake_openai, model="gpt-4o")
    ] == ["function_call"]
    with pytest.raises(openai.BadRequestError, match="Invalid value: 'reasoning'"):
        await first_round(openai_client, fake_openai, include=["reasoning"])
