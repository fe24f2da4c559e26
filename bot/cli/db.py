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
    database = settings_for(log_level="WARNING").store
    prepare_database(database)
    click.echo(f"database at revision {migrate.head_revision()} (head)")


@db.command()
def current() -> None:
    """Show the database's revision."""
    database = settings_for(log_level="WARNING").store
    require_database(database)
    click.echo(migrate.current(database.DATABASE_URL))
