"""``bot db upgrade`` / ``bot db current``."""

from __future__ import annotations

import click

from bot.cli.common import prepare_database, require_database, settings_for
from bot.store import migrate


@click.group()
def db() -> None:
    """Database migrations."""


@db.command()
def upgrade() -> None:
    """Apply pending migrations (Alembic upgrade to head)."""
    settings = settings_for(log_level="WARNING")
    prepare_database(settings)
    click.echo(f"database at revision {migrate.head_revision()} (head)")


@db.command()
def current() -> None:
    """Show the database's revision."""
    settings = settings_for(log_level="WARNING")
    require_database(settings)
    click.echo(migrate.current(settings.DATABASE_URL))
