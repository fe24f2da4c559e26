"""SlackRuntime: the Slack side of a running bot, started and stopped as one; the one
entry point of bot.slack for the rest of the bot.

Start: one HTTP connection pool, ``auth.test`` (a bad token fails here, in one line), the
worker and the jobs it does (those left to take over first), the sweep of expired approval
requests, the Bolt app, and in Socket Mode the websocket. Stop: no new events (the
websocket closes; HTTP stops accepting before this) and nothing more taken over, the jobs
in hand get ``drain_s`` to finish, then the pool closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.config import Settings, hint
from bot.errors import AccessRevoked, BotError, SettingsError, StoreError
from bot.messages import utcnow
from bot.slack import ingress
from bot.slack.app import build_slack_app, web_client
from bot.slack.approvals import Approvals
from bot.slack.delivery import Delivery
from bot.slack.files import SlackFiles
from bot.slack.people import SlackPeople
from bot.slack.poster import Poster
from bot.slack.threads import SlackThreads
from bot.slack.worker import Worker
from bot.slack.workspace import TOKEN_GONE
from bot.wiring import Services

log = logging.getLogger(__name__)

#: how long shutdown waits for the turns in flight
DRAIN_S = 30.0
#: Socket Mode's ping interval, seconds
SOCKET_PING_S = 5
#: HISTORY_RETENTION_DAYS: the purge of older history runs at start, then this often
RETAIN_EVERY_S = 86_400.0
#: look for expired approval requests at least this often (and more often for a short
#: timeout, so that one expires on time)
EXPIRE_EVERY_S = 60.0
#: what auth.test (or apps.connections.open) answers for a token that will not work again
REFUSED_FOR_GOOD = TOKEN_GONE | {"invalid_auth", "token_expired"}


class SlackRuntime:
    """Start, serve, stop; ``handle_http`` serves POST /slack/events in HTTP mode."""

    def __init__(self, settings: Settings, services: Services, *, socket_mode: bool) -> None:
        settings.require("SLACK_BOT_TOKEN")
        settings.require("SLACK_APP_TOKEN" if socket_mode else "SLACK_SIGNING_SECRET")
        self.settings = settings
        self.services = services
        self.socket_mode = socket_mode
        self.app: AsyncApp | None = None
        self.worker: Worker | None = None
        #: HTTP mode: the signing secret, once started
        self._secret: bytes | None = None
        self._socket: ingress.CheckedSocketModeHandler | None = None
        self._session: aiohttp.ClientSession | None = None
        #: what runs every so often: expiring approval requests, retention
        self._sweeps: list[asyncio.Task[None]] = []

    @property
    def in_flight(self) -> int:
        """Jobs in hand (being done, or waiting for their channel)."""
        return self.services.jobs.in_flight

    async def handle_http(self, request: Request) -> Response:
        """POST /slack/events (HTTP mode): bot.slack.ingress checks it, then Bolt."""
        if self.app is None or self._secret is None:  # not started yet
            return JSONResponse({"error": "starting"}, status_code=503)
        return await ingress.handle(request, self.app, self._secret)

    async def start(self) -> None:
        slack, limits = self.settings.slack, self.settings.limits
        self._session = aiohttp.ClientSession()
        client = web_client(slack, self._session)
        identity = await self._identify(client)
        files = SlackFiles(client, limits.FILE_MAX_BYTES, limits.FILE_TEXT_TOKENS)
        services, conversation = self.services, self.settings.conversation
        threads = SlackThreads(client, services.threads, identity.bot_user_id, identity.bot_id)
        # the channel reader's channel is the turn's, never an argument (bot.turn)
        services.registry.add_object(threads, source="Slack")
        # who asked a write, for its tool (their name stored for the admin pages)
        services.people.use(SlackPeople(client, services.threads.name_people))
        delivery = Delivery(
            services.conversations,
            Poster(client, long_answer_messages=slack.LONG_ANSWER_MESSAGES),
            files,
            slack,
            threads if conversation.THREAD_CONTEXT_TOKENS > 0 else None,
            default_project=self.settings.jira.JIRA_PROJECT,
        )
        approvals = Approvals(delivery, slack.ADMIN_SLACK_USERS)
        jobs = services.jobs
        self.worker = Worker(delivery, approvals, services.sessions, jobs, services.threads)
        await jobs.start(self.worker)
        every = min(EXPIRE_EVERY_S, max(limits.APPROVAL_TIMEOUT_S / 4, 0.1))
        self._every(approvals.expire, every, "look for expired approval requests")
        if self.settings.store.HISTORY_RETENTION_DAYS is not None:
            self._every(self._retain, RETAIN_EVERY_S, "delete history past its retention")
        self.app = build_slack_app(
            client=client,
            identity=identity,
            worker=self.worker,
            jobs=jobs,
            channel_rules=services.channels.settings,
            follow_ups=conversation.FOLLOW_UPS,
        )
        if self.socket_mode:
            # Bolt's default ping is every 10 s: a connection that stopped answering would be
            # given up only after four missed pongs, 40 s; here after 20 s
            self._socket = ingress.CheckedSocketModeHandler(
                self.app, slack.SLACK_APP_TOKEN, ping_interval=SOCKET_PING_S
            )
            # a refused app token is one line here; the Socket Mode client itself would retry
            # it forever. Its URL is used at once (apps.connections.open is rate-limited).
            self._socket.client.wss_uri = await self._socket_url(client)
            await self._socket.connect_async()
        else:
            secret = slack.SLACK_SIGNING_SECRET
            assert secret is not None  # required in __init__
            self._secret = secret.encode()
        log.info(
            "Slack connected as %s in %s via %s",
            identity.bot_user_id,
            identity.team_id,
            "Socket Mode" if self.socket_mode else "HTTP",
        )

    async def stop(self, drain_s: float = DRAIN_S) -> None:
        if self._socket is not None:
            await self._socket.close_async()
        for sweep in self._sweeps:
            sweep.cancel()
        await asyncio.gather(*self._sweeps, return_exceptions=True)
        if self.worker is not None:
            await self.services.jobs.close(drain_s)
            await self.worker.close()
        if self._session is not None:
            await self._session.close()

    def _every(self, sweep: Callable[[], Awaitable[object]], every_s: float, what: str) -> None:
        self._sweeps.append(asyncio.create_task(_repeat(sweep, every_s, what)))

    async def _retain(self) -> None:
        """HISTORY_RETENTION_DAYS: what is older leaves the history."""
        days = self.settings.store.HISTORY_RETENTION_DAYS or 0
        purged = await self.services.sessions.purge(utcnow() - timedelta(days=days))
        log.info("retention: %d message(s) older than %g days deleted", purged, days)

    async def _identify(self, client: AsyncWebClient) -> AuthorizeResult:
        async with self._refusals("SLACK_BOT_TOKEN"):
            found = await client.auth_test()
        return AuthorizeResult.from_auth_test_response(
            auth_test_response=found, bot_token=self.settings.slack.SLACK_BOT_TOKEN
        )

    async def _socket_url(self, client: AsyncWebClient) -> str:
        token = self.settings.slack.SLACK_APP_TOKEN
        assert token is not None  # required in __init__
        async with self._refusals("SLACK_APP_TOKEN"):
            opened = await client.apps_connections_open(app_token=token)
        url: str = opened["url"]
        return url

    @contextlib.asynccontextmanager
    async def _refusals(self, token_name: str) -> AsyncIterator[None]:
        """A refused token or an unreachable Slack: one line, and nothing left open."""
        try:
            yield
        except SlackApiError as exc:
            await self.stop()
            error = exc.response.get("error")
            refused = f"{token_name} was refused by Slack ({error})"
            if error in REFUSED_FOR_GOOD:
                raise AccessRevoked(
                    f"{refused}: it is mistyped, revoked or the app was uninstalled; reinstall "
                    f"the app and put {hint(token_name)} in it (exit status 3: "
                    "restarting as is will not help)"
                ) from None
            raise SettingsError(f"{refused}: put {hint(token_name)} in it.") from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            await self.stop()
            raise BotError(
                f"cannot reach Slack at SLACK_API_URL ({type(exc).__name__}); check the "
                "network and the URL"
            ) from None


async def _repeat(sweep: Callable[[], Awaitable[object]], every_s: float, what: str) -> None:
    while True:
        try:
            await sweep()
        except StoreError as exc:
            log.warning("could not %s (%s)", what, exc)
        await asyncio.sleep(every_s)
