"""``bot crm import``: upsert CRM contacts and accounts from CSV files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click
from sqlalchemy.exc import SQLAlchemyError

from bot.cli.common import prepare_database, settings_for
from bot.errors import BotError
from bot.store.crm import CrmImportError, CrmStore, ImportSummary
from bot.store.db import create_engine

_FILE = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)


@click.group()
def crm() -> None:
    """CRM records (contacts and accounts) in the bot's database."""


@crm.command("import")
@click.option(
    "--contacts",
    type=_FILE,
    help="contacts.csv: id, name, email, phone, title, "
    "account_id (other columns are kept as attributes).",
)
@click.option(
    "--accounts",
    type=_FILE,
    help="accounts.csv: id, name, industry, tier, owner, "
    "notes (other columns are kept as attributes).",
)
def import_(contacts: Path | None, accounts: Path | None) -> None:
    """Upsert CRM records by id from CSV files (with a header line), all or nothing."""
    if contacts is None and accounts is None:
        raise click.UsageError("give --contacts FILE, --accounts FILE or both")
    settings = settings_for(log_level="WARNING")
    prepare_database(settings)  # migrations first (bot.store.migrate.upgrade)
    try:
        summary = asyncio.run(_import(settings.DATABASE_URL, contacts, accounts))
    except CrmImportError as exc:
        click.echo(str(exc), err=True)
        raise click.exceptions.Exit(1) from None
    except SQLAlchemyError as exc:
        raise BotError(
            f"the database failed during the import ({type(exc).__name__}); nothing was imported"
        ) from None
    click.echo(summary.describe())


async def _import(url: str, contacts: Path | None, accounts: Path | None) -> ImportSummary:
    engine = create_engine(url)
    try:
        return await CrmStore(engine).import_csv(contacts, accounts)
    finally:
        await engine.dispose()
