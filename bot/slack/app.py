"""build_slack_app: the Bolt app. The cross-cutting Slack rules are middleware, run after
Bolt's own (signature, authorization, the bot's own events, url_verification):

1. ``Revocations``: ``tokens_revoked`` / ``app_uninstalled`` stop every Web API call
   (bot.slack.workspace).
2. ``IgnoreUnwanted``: bots, ignored subtypes and channel messages that do not mention the
   bot are acknowledged and dropped, never stored; a question, a deletion or edit, a
   channel deleted, or a press of one of the bot's buttons becomes a job (people of another
   workspace marked as such). Slack's ``app_rate_limited`` notice is
   acknowledged and logged as an error.
3. ``SubmitOnce``: the job goes into the inbox (bot.jobs) before the ack; a duplicate
   delivery is acknowledged and dropped. A database failure, or a process shutting down,
   answers 503, so Slack delivers the event again later. The event gets its span
   (bot.telemetry), the parent of its job's, and its channel and event id go on the job's
   log lines. (A Bolt middleware's ``next()`` only lets the next one run after it returns:
   what it wraps ends there.)

Listeners then only acknowledge (and put the progress reaction on): the jobs run after the ack,
in the Worker (who may press a button is checked there, against the stored turn).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot import telemetry
from bot.config import SlackSettings
from bot.errors import StoreError
from bot.jobs import Job, ShuttingDown
from bot.jobs.runner import Jobs
from bot.logs import log_context
from bot.slack import listeners
from bot.slack.cards import PRESSES
from bot.slack.events import Question, is_ignored, press_from, understood
from bot.slack.poster import NoDoublePostRetryHandler
from bot.slack.worker import Worker
from bot.slack.workspace import Revocations, WorkspaceClient

log = logging.getLogger(__name__)

Next = Callable[[], Awaitable[BoltResponse]]
_TYPE_NAME = re.compile(r"^[a-z_]{1,40}$")


class _TokenInClient(logging.Filter):
    """Bolt reads SLACK_BOT_TOKEN from the environment by itself and warns that it goes
    unused when a client is given: here ``authorize`` hands out that very token."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


_TOKEN_IN_CLIENT = _TokenInClient()


def web_client(settings: SlackSettings, session: aiohttp.ClientSession) -> WorkspaceClient:
    """The Web API client: SLACK_API_URL, one shared connection pool, and retries of 429s
    (after Retry-After) and of connection errors (not of a post that may have gone through);
    it stops once the workspace revokes the bot (bot.slack.workspace)."""
    return WorkspaceClient(
        token=settings.SLACK_BOT_TOKEN,
        base_url=settings.SLACK_API_URL,
        session=session,
        retry_handlers=[
            NoDoublePostRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ],
    )


def build_slack_app(
    *,
    client: WorkspaceClient,
    identity: AuthorizeResult,
    worker: Worker,
    jobs: Jobs,
) -> AsyncApp:
    """The Bolt app. ``identity`` is the bot's auth.test, taken once at start-up."""

    async def authorize() -> AuthorizeResult:
        return identity

    # Bolt gives each of its loggers the root logger's level unless it gets a base logger:
    # then the level set on "slack_bolt" (WARNING, so refused request bodies, logged at INFO,
    # stay out of the log) holds for all of them
    bolt_logger = logging.getLogger("slack_bolt")
    bolt_logger.addFilter(_TOKEN_IN_CLIENT)
    app = AsyncApp(
        # Bolt names a logger after the app, at the first request, and gives it the base
        # logger's level: named "bot", that was every bot.* logger's parent, and their INFO
        # lines stopped there
        name="slack_bolt.app",
        logger=bolt_logger,
        # a client without a token: Bolt gives each request a copy with identity's token
        client=AsyncWebClient(
            base_url=client.base_url, session=client.session, retry_handlers=client.retry_handlers
        ),
        authorize=authorize,
        # an HTTP request's signature is checked once, over its raw bytes, before Bolt
        # sees it (bot.slack.ingress); Socket Mode has none
        request_verification_enabled=False,
        # the ack goes out at once; the work runs in the Worker afterwards
        process_before_response=False,
        # no workflow steps here, nor Bolt's assistant utilities (the agent view's DM is a
        # DM like any other): this middleware would only cost time
        attaching_function_token_enabled=False,
        attaching_conversation_kwargs_enabled=False,
        # a request no listener takes goes to acknowledge_unhandled (Bolt's own answer is a
        # 404, which Slack retries, and a warning with sample code many lines long)
        raise_error_for_unhandled_request=True,
    )
    app.error(acknowledge_unhandled)
    app.use(Revocations(client))
    app.use(IgnoreUnwanted(identity.team_id))
    app.use(SubmitOnce(jobs))
    listeners.register(app, worker)
    return app


async def acknowledge_unhandled(error: Exception, body: dict[str, Any]) -> BoltResponse | None:
    """Bolt's error handler: a request no listener takes (an event the app does not
    subscribe to, another app's button) is acknowledged with one line; any other error is
    logged with its traceback, as Bolt would."""
    event = body.get("event")
    kinds = (body.get("type"), event.get("type") if isinstance(event, dict) else None)
    kind = " ".join(_name(k) for k in kinds if k is not None)
    if isinstance(error, BoltUnhandledRequestError):
        log.warning("acknowledged a Slack request no listener takes (%s); nothing done", kind)
        return BoltResponse(status=200, body="")
    log.error("the Slack app failed on a request (%s)", kind, exc_info=error)
    return None


def _name(value: object) -> str:
    """A request's or event's type for the log, if it looks like one (never what else
    the sender put there)."""
    return value if isinstance(value, str) and _TYPE_NAME.match(value) else "?"


class IgnoreUnwanted(AsyncMiddleware):
    """Acknowledge and drop what the bot never acts on; make a job of what it does.
    ``home_team``: the bot's workspace (people of another one are told apart)."""

    def __init__(self, home_team: str | None) -> None:
        self.home_team = home_team

    async def async_process(
        self, *, req: AsyncBoltRequest, resp: BoltResponse, next: Next
    ) -> BoltResponse | None:
        body, context = req.body, req.context
        if body.get("type") == "app_rate_limited":
            # acknowledged, or Slack would count failed deliveries too and may turn the
            # subscription off; the events of that minute are lost, which an admin must know
            log.error(
                "Slack dropped this app's events for a minute (from %s): workspace %s sent it "
                "more than 30,000 events in an hour",
                body.get("minute_rate_limited"),
                body.get("team_id"),
            )
            return BoltResponse(status=200, body="")
        if body.get("type") == "block_actions":
            return await self._press(req, next)
        event = body.get("event") if body.get("type") == "event_callback" else None
        if not isinstance(event, dict):
            return await next()
        home_team = self.home_team or body.get("team_id")
        found = understood(event, context.bot_user_id, home_team, body.get("event_time"))
        if is_ignored(event, found):
            return BoltResponse(status=200, body="")
        context["question"] = found if isinstance(found, Question) else None
        if found is not None:
            context["job"] = found.job(body.get("event_id"))
        return await next()

    async def _press(self, req: AsyncBoltRequest, next: Next) -> BoltResponse | None:
        actions = req.body.get("actions")
        ours = isinstance(actions, list) and any(
            isinstance(a, dict) and a.get("action_id") in PRESSES for a in actions
        )
        if not ours:
            return await next()
        press = press_from(req.body, PRESSES, self.home_team)
        if press is None:
            log.warning("ignored a press of the bot's button with a malformed payload")
            return BoltResponse(status=200, body="")
        req.context["job"] = press.job()
        return await next()


class SubmitOnce(AsyncMiddleware):
    """Submit the request's job before the ack; a second delivery is acked and dropped. A
    database failure, or a process shutting down, answers 503: Slack delivers it again."""

    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs

    async def async_process(
        self, *, req: AsyncBoltRequest, resp: BoltResponse, next: Next
    ) -> BoltResponse | None:
        job = req.context.get("job")
        if job is None:
            return await next()
        try:
            with (
                log_context(channel=job.channel, event_id=job.event_id),
                telemetry.received(_span_name(req.body), _attributes(req.body, job)),
            ):
                submitted = await self.jobs.submit(job)
        except ShuttingDown:
            return BoltResponse(status=503, body="")
        except StoreError as exc:
            log.warning(
                "could not take %s in %s on (%s): answering 503 for a later retry",
                job.key,
                job.channel,
                exc,
            )
            return BoltResponse(status=503, body="")
        if not submitted:
            return BoltResponse(status=200, body="")
        return await next()


def _span_name(body: dict[str, Any]) -> str:
    """``slack app_mention``, ``slack message``, ``slack block_actions``"""
    event = body.get("event")
    kind = event.get("type") if isinstance(event, dict) else body.get("type")
    return f"slack {kind}"


def _attributes(body: dict[str, Any], job: Job) -> dict[str, str]:
    attributes = {
        "slack.event.type": _span_name(body).removeprefix("slack "),
        "slack.job": job.kind,
    }
    if job.event_id:
        attributes["slack.event_id"] = job.event_id
    return attributes
