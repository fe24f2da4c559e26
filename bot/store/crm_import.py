"""The CSV import of CRM records.

``contacts.csv`` columns: ``id, name, email, phone, title, account_id``; ``accounts.csv``:
``id, name, industry, tier, owner, notes``. Only ``id`` and ``name`` are required; other
columns are kept in ``attributes``. An import upserts by id in one transaction, after checking
every row: any problem aborts it with a ``CrmImportError`` listing ``file:line: problem``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.errors import BotError
from bot.store.models import AccountRow, ContactRow

#: at most this many problems are listed in a CrmImportError
MAX_PROBLEMS = 20
#: ids are looked up in chunks of this size (database parameter limits)
_CHUNK = 500

#: known columns and their maximum length (the column sizes of the tables)
CONTACT_COLUMNS = {
    "id": 64,
    "name": 300,
    "email": 300,
    "phone": 100,
    "title": 200,
    "account_id": 64,
}
ACCOUNT_COLUMNS = {
    "id": 64,
    "name": 300,
    "industry": 200,
    "tier": 100,
    "owner": 200,
    "notes": 100_000,
}
REQUIRED = ("id", "name")

#: the two kinds of record an import writes
_Record = TypeVar("_Record", AccountRow, ContactRow)


class CrmImportError(BotError):
    """A CSV file has problems; nothing was imported. ``problems`` are ``file:line: what``
    (the first MAX_PROBLEMS of ``total``); ``str()`` is a headline and one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.total = len(problems)
        self.problems = problems[:MAX_PROBLEMS]
        lines = [f"CRM import failed, nothing was imported ({_plural(self.total, 'problem')}):"]
        lines += self.problems
        if self.total > MAX_PROBLEMS:
            lines.append(f"... and {self.total - MAX_PROBLEMS} more")
        super().__init__("\n".join(lines))


@dataclass
class ImportSummary:
    """What an import did, per file."""

    contacts_created: int = 0
    contacts_updated: int = 0
    accounts_created: int = 0
    accounts_updated: int = 0
    contacts_imported: bool = False
    accounts_imported: bool = False

    def describe(self) -> str:
        """E.g. 'Imported 12 contacts (10 new, 2 updated) and 4 accounts (4 new).'"""
        parts = []
        if self.contacts_imported:
            parts.append(_count("contact", self.contacts_created, self.contacts_updated))
        if self.accounts_imported:
            parts.append(_count("account", self.accounts_created, self.accounts_updated))
        return f"Imported {' and '.join(parts) or 'nothing'}."


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _count(noun: str, created: int, updated: int) -> str:
    text = _plural(created + updated, noun)
    details = [f"{n} {label}" for n, label in ((created, "new"), (updated, "updated")) if n]
    return f"{text} ({', '.join(details)})" if details else text


@dataclass
class _Row:
    line: int
    #: every known column, None when empty or absent from the file
    values: dict[str, str | None]
    #: the known columns the file has (an update leaves the others alone)
    present: list[str]
    attributes: dict[str, str | None] = field(default_factory=dict)


class _Problems:
    """Problems found while checking, reported in file and line order."""

    def __init__(self) -> None:
        self.items: list[tuple[str, int, str]] = []

    def add(self, path: Path, line: int, what: str) -> None:
        self.items.append((str(path), line, what))

    def __bool__(self) -> bool:
        return bool(self.items)

    def lines(self) -> list[str]:
        return [f"{file}:{line}: {what}" for file, line, what in sorted(self.items)]


async def import_csv(
    sessions: async_sessionmaker[AsyncSession],
    contacts: Path | None = None,
    accounts: Path | None = None,
) -> ImportSummary:
    """Upsert both files by id in one transaction, or raise CrmImportError and change
    nothing."""
    if contacts is None and accounts is None:
        raise ValueError("give a contacts file, an accounts file or both")
    problems = _Problems()
    account_rows = _read(accounts, ACCOUNT_COLUMNS, problems) if accounts else []
    contact_rows = _read(contacts, CONTACT_COLUMNS, problems) if contacts else []
    summary = ImportSummary(
        contacts_imported=contacts is not None, accounts_imported=accounts is not None
    )
    async with sessions() as session, session.begin():
        if contacts is not None:
            named = (r.values["account_id"] for r in contact_rows)
            wanted = {account_id for account_id in named if account_id is not None}
            wanted -= {r.values["id"] for r in account_rows}
            known = await _existing(session, AccountRow, wanted)
            for row in contact_rows:
                account_id = row.values["account_id"]
                if account_id in wanted and account_id not in known:
                    where = f"in neither {accounts.name} nor" if accounts else "not in"
                    problems.add(
                        contacts, row.line, f"account_id {account_id!r} is {where} the database"
                    )
        if problems:
            raise CrmImportError(problems.lines())
        if accounts is not None:
            summary.accounts_created, summary.accounts_updated = await _upsert(
                session, AccountRow, account_rows
            )
        if contacts is not None:
            summary.contacts_created, summary.contacts_updated = await _upsert(
                session, ContactRow, contact_rows
            )
    return summary


def _read(path: Path, columns: dict[str, int], problems: _Problems) -> list[_Row]:
    """Parse and check one file, adding what is wrong to ``problems``."""
    text = _decoded(path, problems)
    if text is None:
        return []
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[_Row] = []
    first_line: dict[str, int] = {}
    header: list[str] | None = None
    line = 1
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.add(path, line, f"malformed CSV ({exc}) in the record starting here")
            return rows
        start, line = line, reader.line_num + 1
        if header is None:
            header = [name.strip().lower() for name in record]
            if not _check_header(path, header, problems):
                return []
        elif any(value.strip() for value in record):  # not a blank line
            row = _record(path, start, header, record, columns, problems)
            if row is not None:
                _check_id(path, row, first_line, problems)
                rows.append(row)
    if header is None:
        problems.add(path, 1, "the file is empty; expected a header line")
    return rows


def _decoded(path: Path, problems: _Problems) -> str | None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        problems.add(path, 0, f"cannot be read ({exc.strerror})")
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start
        line = data.count(b"\n", 0, start) + 1
        column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        problems.add(
            path,
            line,
            f"not valid UTF-8 (byte 0x{data[start]:02x} at column {column}); "
            "save the file as UTF-8",
        )
        return None


def _record(
    path: Path,
    start: int,
    header: list[str],
    record: list[str],
    columns: dict[str, int],
    problems: _Problems,
) -> _Row | None:
    """One record as a row, its problems added; None when its fields do not line up."""
    if len(record) != len(header):
        problems.add(path, start, f"expected {len(header)} fields, found {len(record)}")
        return None
    values: dict[str, str | None] = dict.fromkeys(columns)
    attributes: dict[str, str | None] = {}
    for name, raw in zip(header, record, strict=True):
        value = raw.strip() or None
        if name in columns:
            values[name] = value
            if value is not None and len(value) > columns[name]:
                problems.add(path, start, f"{name} is longer than {columns[name]} characters")
        else:
            attributes[name] = value
    for name in REQUIRED:
        if values[name] is None:
            problems.add(path, start, f"{name} is empty")
    present = [name for name in header if name in columns]
    return _Row(start, values, present, attributes)


def _check_id(path: Path, row: _Row, first_line: dict[str, int], problems: _Problems) -> None:
    row_id = row.values["id"]
    if row_id is None:
        return
    if row_id in first_line:
        problems.add(
            path, row.line, f"duplicate id {row_id!r} (first on line {first_line[row_id]})"
        )
    else:
        first_line[row_id] = row.line


def _check_header(path: Path, header: list[str], problems: _Problems) -> bool:
    ok = True
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        problems.add(
            path,
            1,
            f"missing required column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(the header has: {', '.join(header) or 'nothing'})",
        )
        ok = False
    seen: set[str] = set()
    for position, name in enumerate(header, start=1):
        if not name:
            problems.add(path, 1, f"column {position} has no name")
            ok = False
        elif name in seen:
            problems.add(path, 1, f"column {name!r} appears twice")
            ok = False
        seen.add(name)
    return ok


async def _existing(
    session: AsyncSession, model: type[AccountRow] | type[ContactRow], ids: Iterable[str]
) -> set[str]:
    found: set[str] = set()
    wanted = sorted(ids)
    for i in range(0, len(wanted), _CHUNK):
        chunk = wanted[i : i + _CHUNK]
        found.update(await session.scalars(select(model.id).where(model.id.in_(chunk))))
    return found


async def _upsert(session: AsyncSession, model: type[_Record], rows: list[_Row]) -> tuple[int, int]:
    """Insert new ids, update existing ones: columns present in the file are overwritten
    (an empty cell clears), attributes are merged (an empty cell removes the key)."""
    existing: dict[str | None, _Record] = {}
    ids = [r.values["id"] for r in rows]
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        for stored in await session.scalars(select(model).where(model.id.in_(chunk))):
            existing[stored.id] = stored
    created = updated = 0
    for row in rows:
        obj = existing.get(row.values["id"])
        if obj is None:
            obj = model(**row.values, attributes={})
            session.add(obj)
            created += 1
        else:
            for name in row.present:
                setattr(obj, name, row.values[name])
            updated += 1
        attributes = dict(obj.attributes or {})
        for name, value in row.attributes.items():
            if value is None:
                attributes.pop(name, None)
            else:
                attributes[name] = value
        obj.attributes = attributes
    await session.flush()
    return created, updated
