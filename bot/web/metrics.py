"""``GET /metrics``: the process's Prometheus series (bot.metrics), for a bearer token.

The token is METRICS_TOKEN, or ADMIN_TOKEN when that is unset; with neither there is no
route (404), as for /admin.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from bot import metrics
from bot.config import WebSettings
from bot.web.access import bearer_token
from bot.web.throttle import LoginThrottle, Throttled


def metrics_route(settings: WebSettings, throttle: LoginThrottle) -> Route | None:
    """The route, or None when no token would let anyone in. Wrong tokens count in
    ``throttle`` with the admin pages' (it may be ADMIN_TOKEN that is being guessed)."""
    token = settings.METRICS_TOKEN or settings.ADMIN_TOKEN
    if not token:
        return None

    async def scrape(request: Request) -> Response:
        presented = bearer_token(request)
        try:
            allowed = presented is not None and await throttle.try_token(
                request, presented, token, "metrics token on"
            )
        except Throttled as throttled:
            return PlainTextResponse(
                f"Too many wrong tokens; try again in {throttled.retry_after_s} seconds.\n",
                status_code=429,
                headers={"Retry-After": str(throttled.retry_after_s)},
            )
        if not allowed:
            return PlainTextResponse(
                "Authorization: Bearer METRICS_TOKEN (or ADMIN_TOKEN) is needed.\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
        body, content_type = metrics.render()
        return Response(body, media_type=content_type, headers={"Cache-Control": "no-store"})

    return Route("/metrics", scrape, methods=["GET"])
