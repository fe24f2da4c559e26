"""What the chosen libraries alone cost a turn, call by call, on this machine: the floor
under ``slack_load.py``'s figures.

Each figure is the CPU of one call, made one at a time (no load), through the bot's own
client set-up, to the fakes on 127.0.0.1:

- ack: a bare slack-bolt ``AsyncApp`` (set up as the bot's, its listener only acks) behind
  uvicorn on uvloop; the CPU of the server's thread per signed ``app_mention`` request;
- model request: one ``ChatCompletionsModel.complete`` (the openai SDK's ``post``);
- Slack Web API: one ``chat.postMessage`` and one ``reactions.add`` through the bot's
  ``AsyncWebClient``.

When N mentions arrive at once on one core, the last ack cannot go out before N acks'
CPU, and the last channel's first model request not before N x (ack + model request):
its answer is then at least that plus the model's two latencies away, with nothing
stored, no working sign and no other turn's tool round in between. This prints both.

    uv run python bench/library_floor.py [--channels 200] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import uvicorn
import uvloop
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.slack_load import HOST, SECRET, TOKEN, free_port, mention
from bot.config import load_settings
from bot.messages import Message, ToolSpec
from bot.slack.app import web_client
from bot.wiring import build_model
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.slack_server import FakeSlack, signed_headers

CALLS = 300
WARM_UP = 30


def bare_bolt_app() -> Starlette:
    """Bolt with the bot's options and a listener that only acks."""
    identity = AuthorizeResult(
        enterprise_id=None, team_id="T1", bot_user_id="UBOT", bot_id="BBOT", bot_token=TOKEN
    )

    async def authorize() -> AuthorizeResult:
        return identity

    bolt = AsyncApp(
        signing_secret=SECRET,
        authorize=authorize,
        process_before_response=False,
        attaching_function_token_enabled=False,
        attaching_conversation_kwargs_enabled=False,
    )

    @bolt.event("app_mention")
    async def acknowledged(ack) -> None:  # type: ignore[no-untyped-def]
        await ack()

    handler = AsyncSlackRequestHandler(bolt)

    async def events(request: Request):  # type: ignore[no-untyped-def]
        return await handler.handle(request)

    return Starlette(routes=[Route("/slack/events", events, methods=["POST"])])


class BoltServer:
    """uvicorn on uvloop in a thread of its own, whose CPU clock can be read."""

    def __init__(self) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            bare_bolt_app(),
            host=HOST,
            port=self.port,
            lifespan="off",
            log_config=None,
            access_log=False,
            loop="none",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=lambda: uvloop.run(self.server.serve()))
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def cpu(self) -> float:
        return time.clock_gettime(time.pthread_getcpuclockid(self.thread.ident))  # type: ignore[arg-type]

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


async def per_call(call: Callable[[], Awaitable[object]], cpu: Callable[[], float]) -> float:
    """Milliseconds of ``cpu`` per call, after a warm-up."""
    for _ in range(WARM_UP):
        await call()
    before = cpu()
    for _ in range(CALLS):
        await call()
    return (cpu() - before) / CALLS * 1000


async def measure(slack: FakeSlack, openai: FakeOpenAI) -> dict[str, float]:
    settings = load_settings(
        OPENAI_API_KEY="bench-key", OPENAI_BASE_URL=openai.base_url, SLACK_API_URL=slack.api_url
    )
    model = build_model(settings)
    question = [Message(role="user", content="<@UBOT> what time is it in CLOAD0001?")]
    tools = [ToolSpec("get_current_time", "The current time.", {"type": "object"})]
    bolt = BoltServer()
    figures: dict[str, float] = {}
    try:
        async with aiohttp.ClientSession() as http:
            sent = iter(range(1_000_000))

            async def ack() -> None:
                body = mention("CLOAD0001", f"1700000000.{next(sent):06d}")
                url = f"http://{HOST}:{bolt.port}/slack/events"
                async with http.post(url, data=body, headers=signed_headers(body, SECRET)) as r:
                    if r.status != 200:
                        raise RuntimeError(f"ack status {r.status}")

            client = web_client(settings.slack.model_copy(update={"SLACK_BOT_TOKEN": TOKEN}), http)
            figures["ack (Bolt, uvicorn)"] = await per_call(ack, bolt.cpu)
            figures["model request (openai SDK)"] = await per_call(
                lambda: model.complete("You are a bot.", question, tools), time.thread_time
            )
            figures["chat.postMessage (slack_sdk)"] = await per_call(
                lambda: client.chat_postMessage(
                    channel="CLOAD0001", thread_ts="1.000001", text="It is now. Anything else?"
                ),
                time.thread_time,
            )
            figures["reactions.add (slack_sdk)"] = await per_call(  # on a new question each
                lambda: client.reactions_add(
                    channel="CLOAD0001", timestamp=f"1.{next(sent):06d}", name="eyes"
                ),
                time.thread_time,
            )
    finally:
        bolt.stop()
        await model.client.close()  # type: ignore[attr-defined]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--channels", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0, help="model latency, seconds")
    args = parser.parse_args()
    slack = FakeSlack(bot_token=TOKEN)
    openai = FakeOpenAI(api_key="bench-key")
    openai.responder = lambda _request: Reply(text="It is now.")
    try:
        figures = uvloop.run(measure(slack, openai))
    finally:
        slack.stop()
        openai.stop()
    for name, ms in figures.items():
        print(f"{name:<30}{ms:.3f} ms CPU a call")
    ack, request = figures["ack (Bolt, uvicorn)"], figures["model request (openai SDK)"]
    n, ideal = args.channels, 2 * args.latency
    last_ack = n * ack
    last_request = n * (ack + request) / 1000
    turn = ack + 2 * request + sum(v for k, v in figures.items() if "slack_sdk" in k)
    print(f"a turn's calls (ack, 2 model requests, the sign, the answer) {turn:.2f} ms of CPU")
    print(f"{n} mentions at once, one core:")
    print(f"  the last ack            >= {last_ack:.0f} ms after the first request arrives")
    print(f"  the last first request  >= {last_request:.2f} s")
    print(
        f"  all answered            >= {last_request + ideal:.2f} s = "
        f"{(last_request + ideal) / ideal:.2f}x the ideal {ideal:.1f} s"
    )


if __name__ == "__main__":
    main()
