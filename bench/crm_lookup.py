"""What a CRM look-up costs the bot, against the fake Salesforce and HubSpot over HTTPS.

The fakes run in a child process, so what this process spends is the bot's own work: the
tool registry, the backend, the HTTP client, TLS and JSON. For each CRM the two tool calls
of the contact -> account flow (``crm_find_contacts`` then ``crm_get_account``) run N
times, one after another, after a first pair that logs in and opens the connection:

* wall: the tool call's time; fake: the time the fake spent answering its requests (its
  own count, from the request's arrival to the answer's making); wall - fake: the bot's
  time plus the network and the fake's HTTP server;
* CPU: this process's CPU time (every thread) per call: the bot's own CPU;
* connections: the TLS connections the fake accepted after the first pair (0: every call
  went on the connection the first opened), and after a pause longer than httpx's default
  keep-alive (5 s).

    uv run python bench/crm_lookup.py [--calls 200] [--pause 6]

Target: CPU per look-up at most 2 ms above the fake's time, no new connection after the
first turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import ssl
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.config import load_settings
from bot.messages import ToolCall
from bot.tools.base import ToolRegistry
from bot.tools.crm import CrmTools, crm_backend
from tests.crm_fakes import hubspot_settings, salesforce_settings, seeded_hubspot, seeded_salesforce
from tests.fakes.tls import ca_file, server_certificate


def serve(pipe: Any) -> None:
    """The child: both fakes with the sample records, until told to stop."""
    fakes = [seeded_salesforce(), seeded_hubspot()]
    pipe.send([f.url for f in fakes])
    pipe.recv()
    for fake in fakes:
        fake.stop()


def stats(url: str) -> dict[str, Any]:
    context = ssl.create_default_context(cafile=str(ca_file()))
    with urllib.request.urlopen(f"{url}/_fake/stats", context=context) as answer:
        return dict(json.loads(answer.read()))


async def measure(name: str, settings: dict[str, Any], url: str, calls: int, pause: float) -> None:
    loaded = load_settings(**settings, DATABASE_URL="sqlite:///:memory:", MCP_CONFIG=None)
    backend = crm_backend(loaded.crm, None, 30.0)
    registry = ToolRegistry()
    registry.add_object(CrmTools(backend, 30.0))

    async def pair() -> list[float]:
        found = await registry.run(ToolCall("f", "crm_find_contacts", '{"query": "Ana"}'))
        (contact,) = json.loads(found.output)["contacts"]
        started = time.perf_counter()
        arguments = json.dumps({"account_id": contact["account_id"]})
        account = await registry.run(ToolCall("a", "crm_get_account", arguments))
        assert account.ok, account.output
        return [time.perf_counter() - started]

    await pair()  # the token (Salesforce), the portal's details (HubSpot), the connection
    before = stats(url)
    walls: list[float] = []
    cpu = time.process_time()
    wall = time.perf_counter()
    for _ in range(calls):
        started = time.perf_counter()
        found = await registry.run(ToolCall("f", "crm_find_contacts", '{"query": "Ana"}'))
        walls.append(time.perf_counter() - started)
        assert found.ok
        walls += await pair()
    cpu = time.process_time() - cpu
    elapsed = time.perf_counter() - wall
    after = stats(url)
    lookups = calls * 3  # each round: a find, then a find and an account
    fake_s = after["handler_seconds"] - before["handler_seconds"]
    new_connections = after["connections"] - before["connections"]
    await asyncio.sleep(pause)
    await pair()
    after_pause = stats(url)["connections"] - after["connections"]
    await backend.close()
    print(
        f"{name:<10} {lookups:>5} look-ups  wall p50 {statistics.median(walls) * 1000:5.2f} ms"
        f"  mean {elapsed / lookups * 1000:5.2f} ms  fake {fake_s / lookups * 1000:5.2f} ms"
        f"  wall-fake {(elapsed - fake_s) / lookups * 1000:5.2f} ms"
        f"  CPU {cpu / lookups * 1000:5.2f} ms  requests {after['requests'] - before['requests']}"
        f"  new connections {new_connections}, after a {pause:g} s pause {after_pause}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--pause", type=float, default=6.0)
    args = parser.parse_args()
    server_certificate()  # made before the fork: the child serves with the CA trusted here
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    child = multiprocessing.get_context("fork").Process(target=serve, args=(theirs,))
    child.start()
    try:
        salesforce_url, hubspot_url = ours.recv()
        runs = [
            ("Salesforce", salesforce_settings(salesforce_url), salesforce_url),
            ("HubSpot", hubspot_settings(hubspot_url), hubspot_url),
        ]
        for name, settings, url in runs:
            asyncio.run(measure(name, settings, url, args.calls, args.pause))
    finally:
        ours.send("stop")
        child.join(10)
        if child.is_alive():
            child.kill()


if __name__ == "__main__":
    main()
