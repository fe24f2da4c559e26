"""What every command shares: settings, logging, migrations, one event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.config import Settings, StoreSettings, load_settings
from bot.errors import BotError
from bot.logs import configure_logging
from bot.store import migrate
from bot.store.db import create_engine

log = logging.getLogger(__name__)

T = TypeVar("T")


def settings_for(*required: str, log_level: str | None = None) -> Settings:
    """Load the settings, check the ones this command needs, set up logging (and tracing
    when OTEL_EXPORTER_OTLP_ENDPOINT is set)."""
    settings = load_settings()
    settings.require(*required)
    telemetry = settings.telemetry
    configure_logging(log_level or telemetry.LOG_LEVEL, telemetry.LOG_FORMAT)
    if telemetry.OTEL_EXPORTER_OTLP_ENDPOINT:
        # loaded only then: the metrics and tracing modules cost a command that runs no turn
        # (history, crm) a tenth of a second
        from bot.telemetry import configure_tracing

        configure_tracing(telemetry)
    return settings


def prepare_database(settings: StoreSettings, *, create: bool = True) -> None:
    """Apply pending migrations; an unreachable database is one clear line. ``create=False``
    (a command that reads): a SQLite file that does not exist is refused, not created."""
    if not create:
        require_database(settings)
    try:
        migrate.upgrade(settings.DATABASE_URL)
    except (SQLAlchemyError, OSError) as exc:
        log.debug("migration failed", exc_info=True)
        raise BotError(
            f"cannot use the database in DATABASE_URL ({_short(exc)}); check that it is "
            "running and the URL is right"
        ) from None


def require_database(settings: StoreSettings) -> None:
    """Refuse a SQLite DATABASE_URL whose file does not exist: a command that reads would
    create an empty database there and report that it holds nothing."""
    path = sqlite_file(settings.DATABASE_URL)
    if path is not None and not path.exists():
        raise BotError(
            f"no database at {path.absolute()}: the SQLite file in DATABASE_URL does not exist "
            "(check the path and the directory you run in; `bot db upgrade` creates it)"
        )


def sqlite_file(database_url: str) -> Path | None:
    """The file of a SQLite URL; None for another database or SQLite in memory."""
    url = make_url(database_url)
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):  # a URI filename (?uri=true)
        database = database.removeprefix("file:").partition("?")[0]
    return Path(database)


def with_engine(settings: StoreSettings, work: Callable[[AsyncEngine], Awaitable[T]]) -> T:
    """Run ``work`` on an engine of DATABASE_URL, in one event loop; disposed of after."""

    async def run() -> T:
        engine = create_engine(settings.DATABASE_URL)
        try:
            return await work(engine)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _short(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    text = str(original).splitlines()[0] if str(original) else type(original).__name__
    return text[:200]
