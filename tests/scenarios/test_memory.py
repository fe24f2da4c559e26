"""A memory that outlives the window, through the real OpenAI client to the strict fake, in
both API modes: the summary request offers no tools and carries what fell out, later
requests carry the summary, and a question deleted in Slack leaves every later request."""

from __future__ import annotations

import json
import re

import pytest

from bot.agent.memory import SUMMARY_HEADING
from tests.fakes.openai_server import FakeOpenAI, Request
from tests.scenarios.test_agent_core import API_MODES, ask, sent_messages

FACT = "Remember this: the launch ticket is ACME-42."
FILLER = "please tell me more about the weather and the plans for the coming week"


def answer(request: Request) -> str:
    """A turn's answer; a summary request (no tools) gets the ticket keys it carries."""
    if request.tool_names:
        return "ok"
    keys = sorted(set(re.findall(r"[A-Z]+-\d+", json.dumps(sent_messages(request)))))
    return f"Ticket keys mentioned: {', '.join(keys) or 'none'}."


def carries(request: Request, text: str) -> bool:
    return text in json.dumps(sent_messages(request), ensure_ascii=False)


@pytest.mark.parametrize("api", API_MODES)
async def test_the_summary_keeps_the_first_fact_until_it_is_deleted(
    make_services, fake_openai: FakeOpenAI, api: str
) -> None:
    services = make_services(LLM_API=api, HISTORY_TOKEN_BUDGET=300)
    fake_openai.responder = answer
    await ask(services, FACT, ts="0.1")
    for n in range(1, 14):
        assert (await ask(services, f"question {n}: {FILLER}", ts=f"{n}.1")).ok

    summaries = [r for r in fake_openai.requests if not r.tool_names]
    assert summaries and all(r.status == 200 for r in fake_openai.requests)
    assert carries(summaries[0], "ACME-42") and carries(summaries[0], "question 1:")
    last = fake_openai.requests[-1]
    assert last.tool_names and carries(last, SUMMARY_HEADING) and carries(last, "ACME-42")
    assert not carries(last, FACT)

    await services.conversations.delete("C1", "0.1")
    fake_openai.requests.clear()
    for n in range(14, 18):
        assert (await ask(services, f"question {n}: {FILLER}", ts=f"{n}.1")).ok

    assert not any(carries(r, "ACME-42") for r in fake_openai.requests)
    assert any(not r.tool_names for r in fake_openai.requests)  # made again without it
    assert carries(fake_openai.requests[-1], SUMMARY_HEADING)
