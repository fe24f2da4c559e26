"""200 channels mention the bot at once, over HTTP: ack latency, time to all answers, memory.

The bot runs as a real ``bot run --http`` subprocess (its RSS is the bot's alone); the fake
Slack and the fake OpenAI run in this process. The model takes ``--latency`` s per request
and makes one tool round (first a get_current_time call, then the answer after its result),
so the ideal time until every answer is posted is 2 x latency.

    uv run python bench/slack_load.py                                   # SQLite
    uv run python bench/slack_load.py --database-url postgresql://postgres@127.0.0.1:5432/test
    uv run python bench/slack_load.py --thread-messages 20              # each asked in a thread

With ``--thread-messages N`` every mention is the last reply of a thread of N messages in
its channel (a parent and N - 2 replies of five other people before it), so each turn also
reads the thread (one ``conversations.replies``) and names its people (``users.info``,
cached: the warm-up's thread has the same people). Compare it with the same run without
the option to see what the thread context costs.

On PostgreSQL the bot gets a fresh database on that server, dropped afterwards.

Targets: ack p99 < 100 ms; all answers within 1.25x the ideal; RSS back within 50 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.openai_server import FakeOpenAI, Reply, Request, ToolUse
from tests.fakes.slack_server import Call, FakeSlack, event_payload, signed_headers
from tests.postgres import fresh_database

SECRET = "bench-signing-secret"
TOKEN = "xoxb-bench"
HOST = "127.0.0.1"


ANSWER = "It is *now*. Anything else?"
#: who writes the threads' other messages (``--thread-messages``)
PEOPLE = {f"UPEOPLE{n}": f"Person {n}" for n in range(5)}
THREAD_TEXT = "same here, since this morning"


def answer_posts(slack: FakeSlack) -> list[Call]:
    """The answers posted (not the live step messages, which are deleted at the end)."""
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if "Anything else?" in (c.args.get("text") or "")
    ]


def one_tool_round(request: Request) -> Reply:
    """A get_current_time call first; the answer once its result is in."""
    conversation = request.body.get("messages") or request.body.get("input") or []
    last = conversation[-1] if conversation else {}
    if last.get("role") == "tool" or last.get("type") == "function_call_output":
        return Reply(text=ANSWER)
    return Reply(tool_calls=[ToolUse("get_current_time", {})])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def mention(channel: str, ts: str, thread_ts: str | None = None) -> str:
    event = {
        "type": "app_mention",
        "channel": channel,
        "user": "U1",
        "text": f"<@UBOT> what time is it in {channel}?",
        "ts": ts,
    }
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event_payload(event)


def asked(slack: FakeSlack, channel: str, ts: str, thread_messages: int, earlier: int) -> str:
    """The body of the mention at ``ts`` in ``channel``: at the top level, or (with
    ``thread_messages``) the last reply of a thread the fake Slack holds, its other messages
    written at second ``earlier`` by the people of PEOPLE."""
    if not thread_messages:
        return mention(channel, ts)
    people = list(PEOPLE)
    parent = slack.add_message(
        channel, "The invoice export is failing again", user=people[0], ts=f"{earlier}.000100"
    )
    for n in range(1, thread_messages - 1):
        slack.add_message(
            channel,
            f"reply {n}: {THREAD_TEXT}",
            user=people[n % len(people)],
            ts=f"{earlier}.{100 + n:06d}",
            thread_ts=parent,
        )
    body = mention(channel, ts, parent)
    text = json.loads(body)["event"]["text"]
    slack.add_message(channel, text, user="U1", ts=ts, thread_ts=parent)
    return body


async def send(http: aiohttp.ClientSession, url: str, body: str) -> float:
    started = time.perf_counter()
    async with http.post(url, data=body, headers=signed_headers(body, SECRET)) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"ack status {response.status}")
    return time.perf_counter() - started


async def ping(http: aiohttp.ClientSession, events_url: str) -> None:
    async with http.get(events_url.replace("/slack/events", "/healthz")) as response:
        await response.read()


async def wait_until(check, within: float, interval: float = 0.01) -> float:  # type: ignore[no-untyped-def]
    """Poll ``check()``; the moment (perf_counter) it first held."""
    deadline = time.perf_counter() + within
    while not check():
        if time.perf_counter() > deadline:
            raise TimeoutError("the bot did not finish in time")
        await asyncio.sleep(interval)
    return time.perf_counter()


def answered(slack: FakeSlack, channels: set[str]) -> int:
    return len({c.args.get("channel") for c in answer_posts(slack)} & channels)


@dataclass
class Figures:
    acks: list[float]  # seconds, one per mention
    elapsed: float  # seconds from the first request to the last answer posted
    cpu: float  # the bot's CPU seconds during the burst
    rss_before: float
    rss_after: float
    posts: int
    phases: dict[str, list[float]]  # per channel: where the time went
    replies: int  # conversations.replies calls during the burst (threads read)
    lookups: int  # users.info calls during the burst (names not cached)
    quoted: int  # channels whose model requests quoted their thread


def quoted(openai: FakeOpenAI, channels: list[str]) -> int:
    """How many of ``channels`` had their thread's messages in their model requests."""
    texts = [json.dumps(r.body) for r in openai.requests]
    return sum(any(f"in {c}?" in t and THREAD_TEXT in t for t in texts) for c in channels)


def phases(
    slack: FakeSlack, openai: FakeOpenAI, channels: list[str], started: float, latency: float
) -> dict[str, list[float]]:
    """Per channel: when its first model request came, the gap between the first reply and the
    second request (the tool round), and between the second reply and the answer post."""
    asked: dict[str, list[float]] = {c: [] for c in channels}
    for request in openai.requests:
        text = json.dumps(request.body)
        channel = next((c for c in channels if f"in {c}?" in text), None)
        if channel is not None:
            asked[channel].append(request.at)
    posted = {c.args.get("channel"): c.at for c in answer_posts(slack)}
    found: dict[str, list[float]] = {"first request": [], "tool round": [], "answer posted": []}
    for channel in channels:
        first, second = sorted(asked[channel])[:2]
        found["first request"].append(first - started)
        found["tool round"].append(second - first - latency)
        found["answer posted"].append(posted[channel] - second - latency)
    return found


async def burst(
    args: argparse.Namespace, slack: FakeSlack, openai: FakeOpenAI, pid: int, url: str
) -> Figures:
    channels = [f"CLOAD{i:04d}" for i in range(args.channels)]
    wanted = set(channels)
    connector = aiohttp.TCPConnector(limit=args.channels)
    async with aiohttp.ClientSession(connector=connector) as http:
        # warm-up: imports, pools and first-call costs are not what is measured; fresh
        # timestamps, as a database reused from an earlier run holds claims on older ones
        run_ts = int(time.time())
        warm = asked(slack, "CWARM", f"{run_ts}.000001", args.thread_messages, run_ts - 1)
        await send(http, url, warm)
        await wait_until(lambda: answered(slack, {"CWARM"}), 30)
        await wait_until(lambda: len(slack.calls_to("reactions.remove")) >= 1, 10)
        # open the client's connections beforehand: what is timed is the bot, not TCP set-up
        await asyncio.gather(*(ping(http, url) for _ in range(args.channels)))
        await asyncio.sleep(0.5)
        rss_before, cpu_before = rss_mb(pid), cpu_s(pid)
        replies_before = len(slack.calls_to("conversations.replies"))
        lookups_before = len(slack.calls_to("users.info"))

        bodies = [
            asked(slack, c, f"{run_ts + 1}.{i:06d}", args.thread_messages, run_ts)
            for i, c in enumerate(channels)
        ]
        started = time.monotonic()
        acks = await asyncio.gather(*(send(http, url, body) for body in bodies))
        # polled slowly (the fakes share this process and its GIL); the time of the last
        # answer is the fake Slack's own record of when it arrived
        await wait_until(lambda: answered(slack, wanted) == len(wanted), 120, interval=0.1)
        done = max(c.at for c in answer_posts(slack) if c.args.get("channel") in wanted)

        await wait_until(lambda: len(slack.calls_to("reactions.remove")) > len(wanted), 30)
        await asyncio.sleep(1.0)
        return Figures(
            acks=list(acks),
            elapsed=done - started,
            cpu=cpu_s(pid) - cpu_before,
            rss_before=rss_before,
            rss_after=rss_mb(pid),
            posts=len(answer_posts(slack)) - 1,
            phases=phases(slack, openai, channels, started, args.latency),
            replies=len(slack.calls_to("conversations.replies")) - replies_before,
            lookups=len(slack.calls_to("users.info")) - lookups_before,
            quoted=quoted(openai, channels),
        )


def report(args: argparse.Namespace, figures: Figures) -> bool:
    ideal = 2 * args.latency
    p50, p99 = percentile(figures.acks, 0.50) * 1000, percentile(figures.acks, 0.99) * 1000
    ratio = figures.elapsed / ideal
    growth = figures.rss_after - figures.rss_before
    database = args.database_url.split("://")[0]
    print(f"database          {database}; the bot: a `bot run --http` subprocess")
    print(f"mentions          {args.channels} channels at once; model latency {args.latency} s")
    if args.thread_messages:
        print(
            f"threads           each mention the last of a {args.thread_messages}-message "
            f"thread: {figures.replies} conversations.replies, {figures.lookups} users.info"
        )
    print(f"ack latency       p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(f"all answered      {figures.elapsed:.2f} s = {ratio:.2f}x the ideal {ideal:.1f} s")
    print(
        f"bot CPU           {figures.cpu:.2f} s, {figures.cpu / args.channels * 1000:.1f} ms a turn"
    )
    for phase, seconds in figures.phases.items():
        print(
            f"  {phase:<16}p50 {percentile(seconds, 0.5):.2f} s, "
            f"max {max(seconds):.2f} s (after the burst / beyond the model's latency)"
        )
    print(
        f"bot RSS           {figures.rss_before:.1f} MB before, "
        f"{figures.rss_after:.1f} MB after ({growth:+.1f})"
    )
    verdicts = {
        "ack p99 < 100 ms": p99 < 100,
        "all answers within 1.25x the ideal": ratio <= 1.25,
        "RSS back within 50 MB": growth <= 50,
        "one answer per mention": figures.posts == args.channels,
    }
    if args.thread_messages:
        verdicts["one thread read per mention"] = figures.replies == args.channels
        verdicts["every thread shown to the model"] = figures.quoted == args.channels
    for name, ok in verdicts.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    return all(verdicts.values())


def start_bot(args: argparse.Namespace, slack: FakeSlack, openai: FakeOpenAI, port: int):  # type: ignore[no-untyped-def]
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": slack.api_url,
        "OPENAI_API_KEY": "bench-key",
        "OPENAI_BASE_URL": openai.base_url,
        "DATABASE_URL": args.database_url,
        "LOG_LEVEL": "WARNING",
        # every mention is U1's, many at once: the load, not the limits, is measured
        "RATE_LIMIT_PER_USER": "0",
        "MAX_CONCURRENT_TURNS": "10000",
        # answers posted, as before streaming: figures comparable across versions
        "STREAM_ANSWERS": "off",
    }
    env.pop("SLACK_APP_TOKEN", None)
    command = [sys.executable, "-m", "bot", "run", "--http", "--port", str(port)]
    return subprocess.Popen(command, env=env)


async def healthy(url: str, bot: subprocess.Popen) -> None:  # type: ignore[type-arg]
    async with aiohttp.ClientSession() as http:
        for _ in range(300):
            if bot.poll() is not None:
                raise SystemExit(f"the bot exited with status {bot.returncode}")
            try:
                async with http.get(url) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("the bot did not become healthy")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        help="default: a fresh SQLite file; a postgresql:// URL: a fresh database on its server",
    )
    parser.add_argument("--channels", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0, help="model latency, seconds")
    parser.add_argument(
        "--thread-messages",
        type=int,
        default=0,
        metavar="N",
        help="ask every mention as the last reply of an N-message thread (at least 2; "
        "default: at the top level)",
    )
    args = parser.parse_args()
    if args.thread_messages and args.thread_messages < 2:
        parser.error("--thread-messages needs at least 2 (a parent and the mention)")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if args.database_url and args.database_url.startswith("postgresql"):
            args.database_url = stack.enter_context(fresh_database(args.database_url, "bench"))
        args.database_url = args.database_url or f"sqlite:///{tmp}/bench.db"
        slack = FakeSlack(bot_token=TOKEN)
        slack.users.update({user: {"display_name": name} for user, name in PEOPLE.items()})
        openai = FakeOpenAI(api_key="bench-key")
        openai.latency = args.latency
        openai.responder = one_tool_round
        port = free_port()
        bot = start_bot(args, slack, openai, port)
        try:
            asyncio.run(healthy(f"http://{HOST}:{port}/healthz", bot))
            figures = asyncio.run(
                burst(args, slack, openai, bot.pid, f"http://{HOST}:{port}/slack/events")
            )
            met = report(args, figures)
        finally:
            bot.send_signal(signal.SIGTERM)
            status = bot.wait(timeout=60)
            print(f"bot stopped on SIGTERM with exit status {status}")
            slack.stop()
            openai.stop()
    if not met:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
