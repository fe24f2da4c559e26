"""``bot run``: migrate, then serve Slack (Socket Mode or HTTP) and /healthz, /admin on
HOST:PORT.

SIGTERM or Ctrl-C: stop taking events, give the turns in flight up to 30 s, exit 0. A
second Ctrl-C stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
from collections.abc import Iterator

import click
import uvicorn
import uvloop

from bot.cli.common import prepare_database, settings_for
from bot.config import Settings

#: how long uvicorn waits for HTTP requests in flight (acks are quick)
HTTP_GRACE_S = 5


@click.command()
@click.option(
    "--http",
    "force_http",
    is_flag=True,
    help="Use the HTTP Events API (needs SLACK_SIGNING_SECRET) even if SLACK_APP_TOKEN is set.",
)
@click.option("--port", type=click.IntRange(1, 65535), help="HTTP port (default: PORT, 3000).")
def run(force_http: bool, port: int | None) -> int:
    """Serve Slack: Socket Mode when SLACK_APP_TOKEN is set (and not --http), else the
    HTTP Events API at POST /slack/events. Either way /healthz and /admin are on the port."""
    settings = settings_for()
    # Socket Mode needs the app token, HTTP the signing secret; without --http either will do
    way_in = "SLACK_SIGNING_SECRET" if force_http else "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET"
    settings.require("SLACK_BOT_TOKEN", "OPENAI_API_KEY", way_in, *settings.crm.required)
    socket_mode = bool(settings.slack.SLACK_APP_TOKEN) and not force_http
    prepare_database(settings.store)
    # uvloop: a faster event loop for a server that handles hundreds of turns at once
    return uvloop.run(_serve(settings, socket_mode, port or settings.web.PORT))


async def _serve(settings: Settings, socket_mode: bool, port: int) -> int:
    # loaded once the settings are known to be good, so a mistake is reported at once
    from bot.slack.runtime import SlackRuntime
    from bot.web.app import create_app, serving
    from bot.wiring import build_services

    services = build_services(settings)
    slack = SlackRuntime(settings, services, socket_mode=socket_mode)
    # what is loaded by now lives as long as the process: out of the collector's sight, a
    # full collection scans what turns create, not every module
    # speed device: see bench/README.md, "gc.freeze at start"
    gc.collect()
    gc.freeze()
    config = uvicorn.Config(
        create_app(services, slack),
        host=settings.web.HOST,
        port=port,
        lifespan="off",  # serving() below starts and stops everything
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=HTTP_GRACE_S,
    )
    async with serving(services, slack):
        await _GracefulServer(config).serve()
    return 0


class _GracefulServer(uvicorn.Server):
    """uvicorn, but a signal ends ``serve()`` normally instead of being raised again after
    it, so the turns in flight are drained and the exit status is 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for sig in signals:
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
