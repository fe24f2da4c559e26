"""Slack faults against the running app (HTTP mode, in-process, as in tests/scenarios/slack):
what Slack or a tool does wrong -> what the thread shows -> what is stored.

Already covered in tests/scenarios/slack and not repeated here: a 429 on chat.postMessage
(retried after Retry-After, posted once), ``not_in_channel``, Slack retries and racing
deliveries, forged signatures, an exception after the ack, a failing model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.routing import Route

from tests.fakes.jira_server import FakeJira
from tests.fakes.openai_server import FakeOpenAI, Reply, Request, ToolUse
from tests.fakes.serve import ServedApp, serve_in_thread
from tests.fakes.slack_server import FakeSlack, signed_headers
from tests.reliability.helpers import JIRA_EMAIL, JIRA_TOKEN, last_user_text, tool_result
from tests.scenarios.slack.conftest import (
    SECRET,
    Clock,
    Database,
    RunningBot,
    dm,
    echo,
    mention,
    turn_finished,
)


class ResettingProxy:
    """Between the bot and the fake Slack: passes every call on, but for the next
    ``resets`` calls to ``method`` it drops the connection once Slack has handled the call,
    so the call took effect and its answer is lost (a connection reset mid-response); with
    ``before_slack`` it drops the connection before passing the call on, so it never
    took effect."""

    def __init__(
        self, upstream: FakeSlack, method: str, resets: int = 1, *, before_slack: bool = False
    ) -> None:
        self.upstream = upstream
        self.method = method
        self.resets = resets
        self.before_slack = before_slack
        self._client = httpx.AsyncClient(base_url=upstream.url, timeout=10)
        app = Starlette(routes=[Route("/api/{method}", self._forward, methods=["GET", "POST"])])

        async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
            # uvicorn's per-request send is bound to the connection: the way to drop it
            if scope["type"] == "http":
                transport = getattr(getattr(send, "__self__", None), "transport", None)
                scope.setdefault("state", {})["transport"] = transport
            await app(scope, receive, send)

        self._served: ServedApp = serve_in_thread(asgi)
        self.api_url = self._served.url + "/api/"

    async def _forward(self, request: HttpRequest) -> Response:
        method = request.path_params["method"]
        if method == self.method and self.resets > 0:
            self.resets -= 1
            if not self.before_slack:
                await self._pass_on(request, method)
            request.scope["state"]["transport"].abort()
            await asyncio.sleep(0.01)
            return Response(status_code=502)  # never arrives: the connection is gone
        answer = await self._pass_on(request, method)
        return Response(
            answer.content, status_code=answer.status_code, media_type="application/json"
        )

    async def _pass_on(self, request: HttpRequest, method: str) -> httpx.Response:
        headers = {
            k: v for k, v in request.headers.items() if k in ("authorization", "content-type")
        }
        return await self._client.request(
            request.method,
            f"/api/{method}",
            params=request.query_params,
            content=await request.body(),
            headers=headers,
        )

    def stop(self) -> None:
        self._served.stop()


@pytest.fixture
def start_proxy(fake_slack: FakeSlack) -> Iterator[Callable[..., ResettingProxy]]:
    """``start_proxy(**options)``: a ResettingProxy of chat.postMessage."""
    proxies: list[ResettingProxy] = []

    def start(**options: Any) -> ResettingProxy:
        proxies.append(ResettingProxy(fake_slack, "chat.postMessage", **options))
        return proxies[-1]

    yield start
    for proxy in proxies:
        proxy.stop()


@pytest.fixture
def proxy(start_proxy: Callable[..., ResettingProxy]) -> ResettingProxy:
    return start_proxy()


async def test_a_reset_after_slack_posted_the_answer_does_not_post_it_twice(
    start_bot, proxy: ResettingProxy, fake_slack: FakeSlack, db: Database, clock: Clock
) -> None:
    """The connection drops after Slack posted the answer, before its response arrives ->
    the client cannot tell whether it was posted -> the thread shows the answer once; the
    turn is stored once."""
    bot: RunningBot = start_bot(SLACK_API_URL=proxy.api_url)
    ts = clock.ts()

    assert (await bot.send(mention("C1", ts, "hello"))).status_code == 200

    await fake_slack.wait_for(turn_finished("C1", ts), timeout=10)
    await bot.idle()
    assert [m.role for m in await db.history.messages("C1")] == ["user", "assistant"]
    answers = [m["text"] for m in fake_slack.messages("C1")]
    assert answers == ["You said: hello"]


async def test_resets_after_slack_posted_chunks_of_a_long_answer_in_a_dm_post_each_once(
    start_bot, start_proxy, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    """A long answer in a DM (top-level posts, no thread); the connection drops after Slack
    posted each of its first two chunks -> the DM shows every chunk once, in order."""
    proxy: ResettingProxy = start_proxy(resets=2)
    # posted as messages, however many (not as a file)
    bot: RunningBot = start_bot(SLACK_API_URL=proxy.api_url, LONG_ANSWER_MESSAGES="0")
    paragraphs = [f"Paragraph {i}: " + "word " * 200 for i in range(1, 13)]
    fake_openai.script(Reply(text="\n\n".join(paragraphs)))
    ts = clock.ts()

    await bot.send(dm("D1", ts))

    await fake_slack.wait_for(turn_finished("D1", ts), timeout=20)
    texts = [m["text"] for m in fake_slack.messages("D1")]
    assert len(texts) >= 3
    numbers = [int(n) for text in texts for n in re.findall(r"Paragraph (\d+):", text)]
    assert numbers == list(range(1, 13))
    assert [c.ok for c in fake_slack.calls_to("conversations.history")] == [True, True]


async def test_a_reset_before_slack_saw_the_answer_posts_it_once(
    start_bot, start_proxy, fake_slack: FakeSlack, clock: Clock
) -> None:
    """The connection drops before the post reaches Slack -> the thread holds no such message
    -> the answer is posted again, once."""
    proxy: ResettingProxy = start_proxy(before_slack=True)
    bot: RunningBot = start_bot(SLACK_API_URL=proxy.api_url)
    ts = clock.ts()
    fake_slack.add_message("C1", "<@UBOT> hello", ts=ts)

    await bot.send(mention("C1", ts, "hello"))

    await fake_slack.wait_for(turn_finished("C1", ts), timeout=10)
    assert [c.ok for c in fake_slack.calls_to("conversations.replies")] == [True]
    assert [c.ok for c in fake_slack.calls_to("chat.postMessage")] == [True]
    answers = [m["text"] for m in fake_slack.thread("C1", ts) if m["user"] == "UBOT"]
    assert answers == ["You said: hello"]


@pytest.mark.parametrize(
    "error", ["channel_not_found", "not_in_channel", "is_archived", "invalid_auth"]
)
async def test_a_refused_post_is_not_retried_and_other_channels_are_served(
    bot: RunningBot, fake_slack: FakeSlack, db: Database, clock: Clock, error: str
) -> None:
    """chat.postMessage answers ``channel_not_found`` / ``not_in_channel`` / ``is_archived``
    / ``invalid_auth`` -> logged, tried once (no retry loop), the next channel is answered
    normally -> the refused channel's turn stays stored and its claim is done (a Slack
    retry would not answer it again)."""
    fake_slack.fail_next("chat.postMessage", error=error)
    refused, fine = clock.ts(), clock.ts()

    await bot.send(mention("C1", refused))
    await fake_slack.wait_for(turn_finished("C1", refused))
    await bot.send(mention("C2", fine))
    await fake_slack.wait_for(turn_finished("C2", fine))
    await bot.idle()

    assert [(c.args["channel"], c.error) for c in fake_slack.calls_to("chat.postMessage")] == [
        ("C1", error),
        ("C2", None),
    ]
    assert [m.role for m in await db.history.messages("C1")] == ["user", "assistant"]
    assert await db.inbox.status("C1", refused) == "done"
    assert [m["text"] for m in fake_slack.messages("C2")] == ["You said: hello"]


@pytest.fixture
def jira() -> Iterator[FakeJira]:
    with FakeJira(email=JIRA_EMAIL, api_token=JIRA_TOKEN, projects={"TASK": {}}) as fake:
        fake.add_issue("TASK-1", summary="Slow export")
        yield fake


async def test_a_stalled_jira_holds_up_nothing_else(
    start_bot, jira: FakeJira, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    """Jira never answers the read in C1 (TOOL_TIMEOUT_S=3) -> meanwhile mentions in three
    other channels are acked at once and answered before C1's turn ends -> C1 is answered
    with the time-out the model was told about."""

    def model(request: Request) -> Reply | ToolUse:
        if last_user_text(request) != "status of TASK-1?":
            return echo(request)
        items = request.body["messages"]
        if items[-1]["role"] == "tool":
            return Reply(text="Jira: " + json.dumps(tool_result(request, "get")))
        return ToolUse("jira_get_issue", {"issue_key": "TASK-1"}, "get")

    bot: RunningBot = start_bot(
        JIRA_URL=jira.url,
        JIRA_EMAIL=JIRA_EMAIL,
        JIRA_API_TOKEN=JIRA_TOKEN,
        JIRA_PROJECT="TASK",
        TOOL_TIMEOUT_S=3,
    )
    fake_openai.responder = model
    jira.hang_next(30, r"/issue/TASK-1$")
    stalled = clock.ts()
    await bot.send(mention("C1", stalled, "status of TASK-1?"))
    await until_jira_called(jira)

    others = {f"C{n}": clock.ts() for n in (2, 3, 4)}
    acks = []
    for channel, ts in others.items():
        started = time.monotonic()
        assert (await bot.send(mention(channel, ts, f"hi from {channel}"))).status_code == 200
        acks.append(time.monotonic() - started)
    await fake_slack.wait_for(lambda s: all(turn_finished(c, ts)(s) for c, ts in others.items()))
    assert not turn_finished("C1", stalled)(fake_slack)  # still waiting for Jira
    assert max(acks) < 1.0

    await fake_slack.wait_for(turn_finished("C1", stalled), timeout=10)
    # the live step message ("Looking up TASK-1 in Jira…") is gone; the answer is there
    (answer,) = fake_slack.messages("C1")
    assert "Jira did not answer within" in answer["text"]
    for channel in others:
        texts = [m["text"] for m in fake_slack.messages(channel)]
        assert texts == [f"You said: hi from {channel}"]


async def until_jira_called(jira: FakeJira) -> None:
    deadline = time.monotonic() + 10
    while not jira.calls("GET", r"/issue/TASK-1$"):
        assert time.monotonic() < deadline, "Jira was never asked"
        await asyncio.sleep(0.02)


async def test_slacks_rate_limit_notice_is_acknowledged_and_logged_as_an_error(
    bot: RunningBot,
    fake_slack: FakeSlack,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """More than 30,000 events an hour: Slack sends ``app_rate_limited`` instead of the
    minute's events. It is acknowledged (failures would pile up until Slack turns the
    subscription off) and an admin sees it in the log; the bot goes on answering."""
    notice = json.dumps(
        {
            "token": "legacy-verification-token",
            "type": "app_rate_limited",
            "team_id": "T1",
            "minute_rate_limited": 1700000040,
            "api_app_id": "A1",
        }
    )

    with caplog.at_level(logging.ERROR, logger="bot"):
        response = await bot.post(notice, signed_headers(notice, SECRET))

    assert response.status_code == 200
    (logged,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "1700000040" in logged.getMessage() and "T1" in logged.getMessage()
    ts = clock.ts()
    await bot.send(mention("C1", ts, "still there?"))
    await fake_slack.wait_for(turn_finished("C1", ts))


async def test_a_slow_step_message_is_up_before_the_tool_runs(
    start_bot, jira: FakeJira, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    """Slack takes 0.5 s to post the step message -> Jira is asked only once it is up (and
    its ts noted for a successor, should this process die while the tool runs) -> the
    answer, and no step message left."""

    def model(request: Request) -> Reply | ToolUse:
        if request.body["messages"][-1]["role"] == "tool":
            return Reply(text="Jira: " + json.dumps(tool_result(request, "get")))
        return ToolUse("jira_get_issue", {"issue_key": "TASK-1"}, "get")

    bot: RunningBot = start_bot(
        JIRA_URL=jira.url, JIRA_EMAIL=JIRA_EMAIL, JIRA_API_TOKEN=JIRA_TOKEN, JIRA_PROJECT="TASK"
    )
    fake_openai.responder = model
    fake_slack.hang_next("chat.postMessage", 0.5, channel="C1")
    ts = clock.ts()
    await bot.send(mention("C1", ts, "status of TASK-1?"))
    await until_jira_called(jira)
    shown = [m["text"] for m in fake_slack.messages("C1")]

    assert shown == ["_Looking up TASK-1 in Jira…_"]
    await fake_slack.wait_for(turn_finished("C1", ts), timeout=10)
    (answer,) = fake_slack.messages("C1")
    assert answer["text"].startswith("Jira:")
