"""``GET /metrics``: the process's Prometheus series (bot.metrics), for a bearer token.

The token is METRICS_TOKEN, or ADMIN_TOKEN when that is unset; with neither there is no
route (404), as for /admin.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from bot import metrics
from bot.config import Settings
from bot.web.access import Auth


def metrics_route(settings: Settings) -> Route | None:
    """The route, or None when no token would let anyone in."""
    token = settings.METRICS_TOKEN or settings.ADMIN_TOKEN
    if not token:
        return None
    auth = Auth(token)

    async def scrape(request: Request) -> Response:
        if not auth.bearer(request):
            return PlainTextResponse(
                "Authorization: Bearer METRICS_TOKEN (or ADMIN_TOKEN) is needed.\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
        body, content_type = metrics.render()
        return Response(body, media_type=content_type, headers={"Cache-Control": "no-store"})

    return Route("/metrics", scrape, methods=["GET"])
