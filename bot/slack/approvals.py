"""Approvals: what the bot's buttons do, and approval requests that expire.

Only the person who asked, or one of ADMIN_SLACK_USERS, may press; anyone else is told so
in a message only they see, and nothing runs. Nobody of another workspace (a shared channel)
may answer an approval card; one who asked may press Continue, and the turn goes on without
running any write for them. A press is a job of its channel (keyed by its
action_ts), so it runs after the work before it and at most once, in any process; the
stopped turn lives in the database, and ``Conversations.resume`` claims it atomically, so a
second press runs nothing twice. Whatever message the press says it came from, only the
card recorded for the turn is ever edited.
"""

from __future__ import annotations

import logging

from bot.agent.approval import APPROVAL
from bot.agent.conversations import Conversations
from bot.messages import Decision, Outcome
from bot.slack.cards import APPROVE, CONTINUE, DECLINE
from bot.slack.delivery import EXPIRED, Delivery
from bot.slack.events import Thread
from bot.slack.presses import Press
from bot.slack.stream import Recipient

log = logging.getLogger(__name__)

ONLY_THE_REQUESTER = "Only the person who asked (or a bot admin) can answer this request."
NOT_FROM_HERE = (
    "Only people of the bot's own Slack workspace can approve or cancel its changes; "
    "nothing was done."
)
ALREADY_HANDLED = "This request has already been answered."
DECLINED = "The person who asked cancelled this action, so it was not done."
#: the state a turn waits in for each button
WAITING = {
    APPROVE: Outcome.AWAITING_APPROVAL,
    DECLINE: Outcome.AWAITING_APPROVAL,
    CONTINUE: Outcome.MAX_ROUNDS,
}


class Approvals:
    def __init__(self, delivery: Delivery, admins: list[str]) -> None:
        self.delivery = delivery
        self.conversations: Conversations = delivery.conversations
        self.poster = delivery.poster
        self.admins = frozenset(admins)

    async def press(self, press: Press, *, resumed: bool = False) -> bool:
        """Do what a press asks, if its presser may; True once it is dealt with."""
        turn = await self.conversations.turn(press.turn_id)
        if turn is None or turn.channel_id != press.channel:
            log.warning("press on unknown turn %s in %s", press.turn_id, press.channel)
            return True
        card = turn.card or {}
        thread = Thread(press.channel, card.get("thread_ts") or None)
        if press.external and press.action != CONTINUE:
            log.info("%s of another workspace may not answer turn %s", press.user, press.turn_id)
            await self.poster.post_ephemeral(thread, press.user, NOT_FROM_HERE)
            return True
        asker = turn.user_id
        recipient = Recipient(asker, press.team_id) if asker and press.team_id else None
        if press.user != turn.user_id and press.user not in self.admins:
            log.info("%s may not answer turn %s", press.user, press.turn_id)
            await self.poster.post_ephemeral(thread, press.user, ONLY_THE_REQUESTER)
            return True
        if resumed and turn.outcome == Outcome.RUNNING:  # its process died while it went on
            await self.delivery.resume(
                thread, press.turn_id, resumed=True, external=press.external, recipient=recipient
            )
            return True
        if turn.outcome != WAITING[press.action]:
            expired = turn.outcome == Outcome.EXPIRED
            if expired:
                await self.delivery.close_card(turn, f":hourglass: {EXPIRED}")
            await self.poster.post_ephemeral(
                thread, press.user, EXPIRED if expired else ALREADY_HANDLED
            )
            return True
        if press.action == CONTINUE:
            if card:
                text = f"Continued by <@{press.user}>."
                await self.poster.update(card["channel"], card["ts"], text)
            await self.delivery.resume(
                thread, press.turn_id, external=press.external, recipient=recipient
            )
            return True
        approved = press.action == APPROVE
        decision = APPROVAL if approved else Decision.reject(DECLINED)
        decisions = {call.id: decision for call in self.conversations.interruptions(turn)}
        verdict = ":white_check_mark: Approved" if approved else ":x: Cancelled"
        await self.delivery.close_card(turn, f"{verdict} by <@{press.user}>")
        reply = await self.delivery.resume(thread, press.turn_id, decisions, recipient=recipient)
        if reply is not None and reply.outcome == Outcome.EXPIRED:
            await self.delivery.close_card(turn, f":hourglass: {EXPIRED}")
        return True

    async def expire(self) -> int:
        """Approval requests left unanswered for APPROVAL_TIMEOUT_S expire, and their cards
        say so (a card updated twice reads the same). How many."""
        expired = await self.conversations.expire_approvals()
        for turn in expired:
            log.info("approval request of turn %s expired", turn.id)
            await self.delivery.close_card(turn, f":hourglass: {EXPIRED}")
        return len(expired)
