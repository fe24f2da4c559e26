"""``bot crm check``: what the configured CRM lets the tools do; ``bot crm import|list|show``:
the contacts and accounts of the bot's own tables (CRM=local)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.cli.common import prepare_database, settings_for, with_engine
from bot.config import Settings
from bot.errors import BotError, SettingsError, ToolError
from bot.store.crm import CrmImportError, CrmStore
from bot.store.db import Engines
from bot.tools.crm.base import Check

T = TypeVar("T")

_FILE = click.Path(exists=True, dir_okay=False, readable=True, path_type=Path)


@click.group()
def crm() -> None:
    """The CRM: check the configured one; the bot's own tables (CRM=local)."""


@crm.command()
def check() -> None:
    """Connect to the CRM (the CRM setting) and say what the tools may do: the CRM, the org
    or portal, and one line per permission they need. Exit 1 when one is missing."""
    settings = settings_for(log_level="WARNING")
    settings.require(*settings.crm.required)
    if settings.crm.CRM == "local":
        prepare_database(settings.store, create=False)
        found = with_engine(settings.store, lambda engine: _check(settings, engine))
    else:
        found = asyncio.run(_check(settings, None))
    for line in found.lines():
        click.echo(line)
    if not all(p.granted for p in found.permissions):
        raise click.exceptions.Exit(1)


async def _check(settings: Settings, engine: AsyncEngine | None) -> Check:
    # the CRM's modules (simple-salesforce, ...) are loaded by the command that uses them
    from bot.tools.crm import CredentialsRefused, crm_backend

    backend = crm_backend(
        settings.crm, Engines.of(engine) if engine else None, settings.limits.TOOL_TIMEOUT_S
    )
    try:
        return await backend.check()
    except CredentialsRefused as exc:
        raise SettingsError(str(exc)) from None
    except ToolError as exc:
        raise BotError(str(exc)) from None
    finally:
        await backend.close()


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
    if settings.crm.CRM != "local":
        raise SettingsError(
            f"bot crm import fills the bot's own tables, which CRM={settings.crm.CRM} does not "
            "use: keep the records in the CRM, or set CRM=local to try the demo tables"
        )
    database = settings.store
    prepare_database(database)  # migrations first (bot.store.migrate.upgrade)
    try:
        summary = with_engine(database, lambda e: CrmStore(e).import_csv(contacts, accounts))
    except CrmImportError as exc:
        click.echo(str(exc), err=True)
        raise click.exceptions.Exit(1) from None
    except SQLAlchemyError as exc:
        raise BotError(
            f"the database failed during the import ({type(exc).__name__}); nothing was imported"
        ) from None
    click.echo(summary.describe())


@crm.command("list")
@click.option("--query", default="", help="Only records with every word in a searched field.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_records(query: str, as_json: bool) -> None:
    """Accounts (name, industry, tier, owner, contacts) and contacts (name, email, title,
    account), ordered by name. --query searches an account's name, industry and owner and a
    contact's name, email and account name."""

    async def read(store: CrmStore) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return await store.accounts(query), await store.contacts(query)

    accounts, contacts = _reading(read)
    if as_json:
        click.echo(json.dumps({"accounts": accounts, "contacts": contacts}, ensure_ascii=False))
        return
    if not accounts and not contacts:
        click.echo("No CRM records match." if query.strip() else "No CRM records.")
        return
    click.echo(f"Accounts ({len(accounts)}):" if accounts else "Accounts: none")
    for account in accounts:
        click.echo(f"  {_line(account['id'], account['name'], _account_facts(account))}")
    click.echo(f"Contacts ({len(contacts)}):" if contacts else "Contacts: none")
    for contact in contacts:
        click.echo(f"  {_line(contact['id'], contact['name'], _contact_facts(contact))}")


@crm.command()
@click.argument("record_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(record_id: str, as_json: bool) -> None:
    """One account (with its contacts) or one contact, by its id; both when both have it."""

    async def read(store: CrmStore) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        return await store.get_account(record_id), await store.get_contact(record_id)

    account, contact = _reading(read)
    if account is None and contact is None:
        raise BotError(f"no CRM account or contact has the id {_printable(record_id)!r}")
    if as_json:
        found = {"account": account, "contact": contact}
        click.echo(json.dumps({k: v for k, v in found.items() if v}, ensure_ascii=False))
        return
    blocks = []
    if account is not None:
        blocks.append(_account_block(account))
    if contact is not None:
        blocks.append(_contact_block(contact))
    click.echo("\n\n".join(blocks))


def _reading(work: Callable[[CrmStore], Awaitable[T]]) -> T:
    """Run ``work`` on the CRM of an existing database (migrated first)."""
    database = settings_for(log_level="WARNING").store
    prepare_database(database, create=False)
    try:
        return with_engine(database, lambda engine: work(CrmStore(engine)))
    except SQLAlchemyError as exc:
        raise BotError(f"the CRM could not be read ({type(exc).__name__})") from None


def _account_block(account: dict[str, Any]) -> str:
    fields = {k: account[k] for k in ("industry", "tier", "owner", "notes")}
    lines = [f"Account {_printable(account['id'])}: {_printable(account['name'])}"]
    lines += _fields({**fields, **account["attributes"]})
    contacts = account["contacts"]
    lines.append(f"  contacts ({len(contacts)}):" if contacts else "  contacts: none")
    lines += [f"    {_line(c['id'], c['name'], _contact_facts(c))}" for c in contacts]
    return "\n".join(lines)


def _contact_block(contact: dict[str, Any]) -> str:
    fields = {k: contact[k] for k in ("email", "phone", "title")}
    if contact["account_id"]:
        name = contact["account_name"]
        fields["account"] = f"{name} ({contact['account_id']})" if name else contact["account_id"]
    lines = [f"Contact {_printable(contact['id'])}: {_printable(contact['name'])}"]
    return "\n".join(lines + _fields({**fields, **contact["attributes"]}))


def _fields(values: dict[str, str | None]) -> list[str]:
    """``  name  value`` lines, names padded; a value's further lines are indented under it."""
    shown = {_printable(k): v for k, v in values.items() if v}
    width = max((len(k) for k in shown), default=0)
    lines = []
    for name, value in shown.items():
        first, *more = [_printable(line) for line in str(value).splitlines() or [""]]
        lines.append(f"  {name.ljust(width)}  {first}")
        lines += [f"  {' ' * width}  {line}" for line in more]
    return lines


def _account_facts(account: dict[str, Any]) -> str:
    count = account["contact_count"]
    facts = [account["industry"], account["tier"], account["owner"] and f"owner {account['owner']}"]
    return ", ".join([*filter(None, facts), f"{count} contact{'' if count == 1 else 's'}"])


def _contact_facts(contact: dict[str, Any]) -> str:
    facts = [contact["email"], contact["title"]]
    if contact.get("account_name"):
        facts.append(f"{contact['account_name']} ({contact['account_id']})")
    return ", ".join(filter(None, facts))


def _line(record_id: str, name: str, facts: str) -> str:
    return _printable(f"{record_id}  {name}" + (f" - {facts}" if facts else ""))


def _printable(text: str) -> str:
    """Stored text for a terminal: control and format characters (escapes, bidi overrides)
    are shown as codes, so a record cannot rewrite the screen."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in str(text))
