"""The ASGI app: ``POST /slack/events`` (HTTP mode), ``GET /healthz``, ``GET /metrics`` and
``/admin``.

    app = create_app(services, slack)   # starts and stops Slack and the services itself

``bot run`` serves it with the lifespan off and calls ``serving`` itself, so a start-up
failure is one line rather than a server traceback.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from bot.slack.runtime import SlackRuntime
from bot.web.admin import admin_app
from bot.web.metrics import metrics_route
from bot.web.throttle import LoginThrottle
from bot.wiring import Services

log = logging.getLogger(__name__)


def create_app(services: Services, slack: SlackRuntime | None = None) -> Starlette:
    """The app; without ``slack`` it serves /healthz, /metrics and /admin only."""

    async def healthz(request: Request) -> Response:
        if await services.sessions.ping():
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "unavailable"}, status_code=503)

    routes: list[BaseRoute] = [Route("/healthz", healthz, methods=["GET"])]
    if slack is not None and not slack.socket_mode:
        routes.append(Route("/slack/events", slack.handle_http, methods=["POST"]))
    # wrong tokens on /metrics and /admin count together
    throttle = LoginThrottle()
    scrape = metrics_route(services.settings.web, throttle)
    if scrape is not None:  # without a token, /metrics stays a 404
        routes.append(scrape)
    admin = admin_app(services.sessions, services.admin_logins, throttle)
    if admin is not None:  # without ADMIN_TOKEN, /admin stays a 404
        routes.append(Mount("/admin", app=admin))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with serving(services, slack):
            yield

    return Starlette(routes=routes, lifespan=lifespan)


@contextlib.asynccontextmanager
async def serving(services: Services, slack: SlackRuntime | None) -> AsyncIterator[None]:
    """Slack started for the duration; then drained, and the services closed."""
    try:
        services.start()
        if services.admin_logins is not None:
            ended = await services.admin_logins.forget_other_tokens()
            if ended:
                log.info("ADMIN_TOKEN changed: %d admin session(s) of the old one ended", ended)
        if slack is not None:
            await slack.start()
        yield
    finally:
        if slack is not None:
            await slack.stop()
        await services.close()
