"""What every command shares: settings, logging, migrations, one event loop."""

from __future__ import annotations

import logging

from sqlalchemy.exc import SQLAlchemyError

from bot.config import Settings, load_settings
from bot.errors import BotError
from bot.logs import configure_logging
from bot.store import migrate

log = logging.getLogger(__name__)


def settings_for(*required: str, log_level: str | None = None) -> Settings:
    """Load the settings, check the ones this command needs, set up logging."""
    settings = load_settings()
    settings.require(*required)
    configure_logging(log_level or settings.LOG_LEVEL, settings.LOG_FORMAT)
    return settings


def prepare_database(settings: Settings) -> None:
    """Apply pending migrations; an unreachable database is one clear line."""
    try:
        migrate.upgrade(settings.DATABASE_URL)
    except (SQLAlchemyError, OSError) as exc:
        log.debug("migration failed", exc_info=True)
        raise BotError(
            f"cannot use the database in DATABASE_URL ({_short(exc)}); check that it is "
            "running and the URL is right"
        ) from None


def _short(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    text = str(original).splitlines()[0] if str(original) else type(original).__name__
    return text[:200]
