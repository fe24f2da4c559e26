"""Presses: what the bot's buttons do, after Slack got its acknowledgement.

Only the person who asked, or one of ADMIN_SLACK_USERS, may press; anyone else is told so
in a message only they see, and nothing runs. The stopped turn lives in the database, so
any process can take a press; ``Conversations.resume`` claims the turn atomically, so a
second press (or a Slack retry, here or in another process) runs nothing twice.
"""

from __future__ import annotations

import logging

from bot.agent.loop import RUN, Decision
from bot.slack.cards import APPROVE, CONTINUE, DECLINE, pending_calls
from bot.slack.delivery import EXPIRED, Delivery
from bot.slack.events import Press

log = logging.getLogger(__name__)

ONLY_THE_REQUESTER = "Only the person who asked (or a bot admin) can answer this request."
ALREADY_HANDLED = "This request has already been answered."
DECLINED = "The person who asked cancelled this action, so it was not done."
#: the state a turn waits in for each button
WAITING = {APPROVE: "awaiting_approval", DECLINE: "awaiting_approval", CONTINUE: "max_rounds"}


class Presses:
    def __init__(self, delivery: Delivery, admins: list[str]) -> None:
        self.delivery = delivery
        self.replies = delivery.replies
        self.store = delivery.store
        self.admins = frozenset(admins)

    async def handle(self, press: Press) -> None:
        turn = await self.store.turn(press.turn_id)
        if turn is None or turn.channel_id != press.thread.channel:
            log.warning("press on unknown turn %s in %s", press.turn_id, press.thread.channel)
            return
        if press.user != turn.user_id and press.user not in self.admins:
            log.info("%s may not answer turn %s", press.user, press.turn_id)
            await self.replies.tell(press.thread, press.user, ONLY_THE_REQUESTER)
            return
        if turn.outcome != WAITING.get(press.action):
            expired = turn.outcome == "expired"
            if expired:
                await self._settle(press, f":hourglass: {EXPIRED}")
            told = EXPIRED if expired else ALREADY_HANDLED
            await self.replies.tell(press.thread, press.user, told)
            return
        if press.action == CONTINUE:
            await self._continue(press)
        else:
            await self._decide(press)

    async def _decide(self, press: Press) -> None:
        approved = press.action == APPROVE
        turn = await self.store.turn(press.turn_id)
        assert turn is not None
        decision = RUN if approved else Decision("decline", DECLINED)
        calls = pending_calls(turn, self.delivery.registry.writes)
        decisions = {call.id: decision for call in calls}
        verdict = ":white_check_mark: Approved" if approved else ":x: Cancelled"
        await self._settle(press, f"{verdict} by <@{press.user}>")
        reply = await self.delivery.resume(press.thread, press.turn_id, decisions)
        if reply is not None and reply.outcome == "expired":
            await self._settle(press, f":hourglass: {EXPIRED}")

    async def _continue(self, press: Press) -> None:
        text = f"Continued by <@{press.user}>."
        await self.replies.update(press.thread.channel, press.message_ts, text)
        await self.delivery.resume(press.thread, press.turn_id)

    async def _settle(self, press: Press, settled: str) -> None:
        """The card without its buttons, saying what became of it."""
        turn = await self.store.turn(press.turn_id)
        if turn is not None:
            text, blocks = self.delivery.card(turn, settled)
            await self.replies.update(press.thread.channel, press.message_ts, text, blocks)
