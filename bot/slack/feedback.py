"""A press of the feedback buttons under an answer (bot.slack.cards.feedback_block): the
person's verdict on that turn is stored (one per person per turn: a later press replaces
the earlier one) and they are thanked in a message only they see. Anyone who can see the
answer may give theirs: feedback is per person, not the asker's alone."""

from __future__ import annotations

import logging

from bot.agent.sessions import Sessions
from bot.errors import StoreError
from bot.messages import POSITIVE
from bot.slack.events import Press, Thread
from bot.slack.poster import Poster

log = logging.getLogger(__name__)

THANKS = {
    True: "Thanks for the feedback! Glad that helped.",
    False: "Thanks for the feedback. Sorry that missed: it helps make the answers better.",
}


async def give_feedback(sessions: Sessions, poster: Poster, press: Press) -> bool:
    """Store and acknowledge the press; False when the database failed (the job is then
    done again later)."""
    verdict = press.verdict or ""
    try:
        stored = await sessions.give_feedback(press.turn_id, press.channel, press.user, verdict)
    except StoreError:
        log.exception("could not store feedback on turn %s in %s", press.turn_id, press.channel)
        return False
    if not stored:
        log.warning("feedback on unknown turn %s in %s", press.turn_id, press.channel)
        return True
    log.info("%s feedback on turn %s in %s", verdict, press.turn_id, press.channel)
    thread = Thread(press.channel, press.thread_ts)
    await poster.post_ephemeral(thread, press.user, THANKS[verdict == POSITIVE])
    return True
