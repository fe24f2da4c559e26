"""build_slack_app: the Bolt app. The cross-cutting Slack rules are middleware, run after
Bolt's own (signature, authorization, the bot's own events, url_verification):

1. ``IgnoreUnwanted``: bots, ignored subtypes and channel messages that do not mention the
   bot are acknowledged and dropped, never stored; deletions and edits go on. Slack's
   ``app_rate_limited`` notice is acknowledged and logged as an error.
2. ``AnswerOnce``: a question is claimed in the database by (channel, ts) before the ack;
   a duplicate delivery is acknowledged and dropped. A database failure answers 503, so
   Slack delivers the event again later.

Listeners then only hand the work to the TurnRunner, which runs it after the ack (button
presses too: who may press is checked there, against the stored turn).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.exc import SQLAlchemyError

from bot.config import Settings
from bot.slack import listeners
from bot.slack.events import change_from, is_ignored, question_from
from bot.slack.replies import NoDoublePostRetryHandler
from bot.slack.turns import TurnRunner
from bot.store.events import SlackEvents

log = logging.getLogger(__name__)

Next = Callable[[], Awaitable[BoltResponse]]


class _TokenInClient(logging.Filter):
    """Bolt reads SLACK_BOT_TOKEN from the environment by itself and warns that it goes
    unused when a client is given: here ``authorize`` hands out that very token."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


_TOKEN_IN_CLIENT = _TokenInClient()


def web_client(settings: Settings, session: aiohttp.ClientSession) -> AsyncWebClient:
    """The Web API client: SLACK_API_URL, one shared connection pool, and retries of 429s
    (after Retry-After) and of connection errors (not of a post that may have gone through)."""
    return AsyncWebClient(
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
    client: AsyncWebClient,
    identity: AuthorizeResult,
    signing_secret: str | None,
    runner: TurnRunner,
    claims: SlackEvents,
) -> AsyncApp:
    """The Bolt app. ``identity`` is the bot's auth.test, taken once at start-up;
    ``signing_secret`` None means Socket Mode (no HTTP requests to verify)."""

    async def authorize() -> AuthorizeResult:
        return identity

    # Bolt gives each of its loggers the root logger's level unless it gets a base logger:
    # then the level set on "slack_bolt" (WARNING, so refused request bodies, logged at INFO,
    # stay out of the log) holds for all of them
    bolt_logger = logging.getLogger("slack_bolt")
    bolt_logger.addFilter(_TOKEN_IN_CLIENT)
    app = AsyncApp(
        name="bot",
        logger=bolt_logger,
        # a client without a token: Bolt gives each request a copy with identity's token
        client=AsyncWebClient(
            base_url=client.base_url, session=client.session, retry_handlers=client.retry_handlers
        ),
        authorize=authorize,
        signing_secret=signing_secret or "",
        request_verification_enabled=signing_secret is not None,
        # the ack goes out at once; the work runs in the TurnRunner afterwards
        process_before_response=False,
        # no workflow steps here; the assistant pane's listeners attach what they need
        # themselves, so this middleware would only cost time
        attaching_function_token_enabled=False,
        attaching_conversation_kwargs_enabled=False,
    )
    app.use(IgnoreUnwanted())
    app.use(AnswerOnce(claims, runner))
    listeners.register(app, runner)
    return app


class IgnoreUnwanted(AsyncMiddleware):
    """Acknowledge and drop what the bot never answers; note what it acts on."""

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
        event = body.get("event") if body.get("type") == "event_callback" else None
        if not isinstance(event, dict):
            return await next()
        if is_ignored(event, context.bot_user_id):
            return BoltResponse(status=200, body="")
        context["question"] = question_from(event, context.bot_user_id)
        context["change"] = change_from(event, context.bot_user_id)
        return await next()


class AnswerOnce(AsyncMiddleware):
    """Claim a question in the database before the ack; a second delivery is acked and
    dropped. A database failure answers 503, so Slack delivers the event again later."""

    def __init__(self, claims: SlackEvents, runner: TurnRunner) -> None:
        self.claims = claims
        self.runner = runner

    async def async_process(
        self, *, req: AsyncBoltRequest, resp: BoltResponse, next: Next
    ) -> BoltResponse | None:
        question = req.context.get("question")
        if not self.runner.accepting and (question or req.context.get("change")):
            return BoltResponse(status=503, body="")  # shutting down: Slack delivers it again
        if question is None:
            return await next()
        event_id = req.body.get("event_id")
        try:
            claimed = await self.claims.claim(
                question.channel, question.ts, event_id, question.to_dict()
            )
        except (SQLAlchemyError, OSError) as exc:
            log.warning(
                "could not claim %s in %s (%s): answering 503 for a later retry",
                question.ts,
                question.channel,
                type(exc).__name__,
            )
            return BoltResponse(status=503, body="")
        if not claimed:
            log.info(
                "skipped a second delivery of %s in %s (event %s)",
                question.ts,
                question.channel,
                event_id,
            )
            return BoltResponse(status=200, body="")
        return await next()
