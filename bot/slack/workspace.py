"""The workspace the bot is installed in: whether it still lets the bot in.

When the workspace takes the bot's token back (a ``tokens_revoked`` event naming the bot,
``app_uninstalled``, or any Web API call answered ``token_revoked`` or ``account_inactive``,
as another process of the bot may have been told first), the Web API client refuses every
call from then on without sending it (``WorkspaceClient``): turns still running end, and
nothing more is posted there. An admin must reinstall the app; a restart then fails at
``auth.test`` with exit status 3 (bot.slack.runtime) instead of serving a dead token.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

log = logging.getLogger(__name__)

#: Web API errors that say the bot's token is dead for good
TOKEN_GONE = frozenset({"token_revoked", "account_inactive"})
#: the error of a call the client refused to send (the token is gone)
NOT_SENT = "bot_token_revoked"
#: events that say so
REVOCATIONS = frozenset({"tokens_revoked", "app_uninstalled"})

Next = Callable[[], Awaitable[BoltResponse]]


class WorkspaceClient(AsyncWebClient):
    """The Web API client, which stops calling Slack once the workspace revoked the bot."""

    #: why calls are refused (None: they are not)
    revoked: str | None = None

    def revoke(self, why: str) -> None:
        """No Web API call goes out from now on."""
        if self.revoked is None:
            self.revoked = why
            log.error(
                "Slack revoked the bot's access (%s): nothing more is posted to this workspace; "
                "reinstall the app and restart the bot",
                why,
            )

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        if self.revoked is not None:
            raise SlackApiError(f"not sent: {self.revoked}", self._refused(api_method))
        try:
            return await super().api_call(api_method, **kwargs)
        except SlackApiError as exc:
            error = exc.response.get("error")
            # at start (auth.test) the runtime reports it, in the line the bot exits with
            if error in TOKEN_GONE and api_method != "auth.test":
                self.revoke(f"{api_method} answered {error}")
            raise

    def _refused(self, api_method: str) -> AsyncSlackResponse:
        return AsyncSlackResponse(
            client=self,
            http_verb="POST",
            api_url=self.base_url + api_method,
            req_args={},
            data={"ok": False, "error": NOT_SENT},
            headers={},
            status_code=200,
        )


class Revocations(AsyncMiddleware):
    """``tokens_revoked`` (of the bot's token) and ``app_uninstalled``: the client stops.
    Acknowledged either way; a revocation of people's tokens only (the bot keeps none)
    changes nothing."""

    def __init__(self, client: WorkspaceClient) -> None:
        self.client = client

    async def async_process(
        self, *, req: AsyncBoltRequest, resp: BoltResponse, next: Next
    ) -> BoltResponse | None:
        body = req.body
        event = body.get("event") if body.get("type") == "event_callback" else None
        kind = event.get("type") if isinstance(event, dict) else None
        if kind not in REVOCATIONS:
            return await next()
        assert isinstance(event, dict)
        tokens = event.get("tokens")
        bots = tokens.get("bot") if isinstance(tokens, dict) else None
        if kind == "app_uninstalled" or (isinstance(bots, list) and bots):
            self.client.revoke(f"{kind} in {body.get('team_id')}")
        return BoltResponse(status=200, body="")
