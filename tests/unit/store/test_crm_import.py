"""CSV import of CRM records: upsert by id, all or nothing, problems reported as file:line."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from bot.cli.crm import crm
from bot.store.crm import CrmImportError, CrmStore
from bot.store.db import create_engine
from bot.store.models import AccountRow, ContactRow

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CONTACTS_HEADER = "id,name,email,phone,title,account_id\n"
ACCOUNTS_HEADER = "id,name,industry,tier,owner,notes\n"


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def store(engine: AsyncEngine) -> CrmStore:
    return CrmStore(engine)


async def counts(engine: AsyncEngine) -> tuple[int, int]:
    async with async_sessionmaker(engine)() as session:
        contacts = await session.scalar(select(func.count()).select_from(ContactRow))
        accounts = await session.scalar(select(func.count()).select_from(AccountRow))
    return contacts or 0, accounts or 0


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


async def test_import_the_examples(store: CrmStore, engine: AsyncEngine) -> None:
    summary = await store.import_csv(EXAMPLES / "contacts.csv", EXAMPLES / "accounts.csv")
    assert summary.describe() == "Imported 8 contacts (8 new) and 4 accounts (4 new)."
    assert await counts(engine) == (8, 4)
    (ana,) = await store.find_contacts("ana lima")
    assert ana["account_name"] == "Acme Corp"


async def test_importing_again_updates(
    store: CrmStore, engine: AsyncEngine, tmp_path: Path
) -> None:
    await store.import_csv(EXAMPLES / "contacts.csv", EXAMPLES / "accounts.csv")
    contacts = write(
        tmp_path / "contacts.csv",
        "id,name,email,title,account_id,preferred_language\n"
        "c-101,Ana Lima,ana@acme.example,COO,acc-001,\n"
        "c-999,New Person,new@acme.example,,acc-001,fr\n",
    )
    summary = await store.import_csv(contacts, None)
    assert summary.describe() == "Imported 2 contacts (1 new, 1 updated)."
    assert (summary.contacts_created, summary.contacts_updated) == (1, 1)
    assert await counts(engine) == (9, 4)
    (ana,) = await store.find_contacts("ana lima")
    assert ana["email"] == "ana@acme.example"
    assert ana["title"] == "COO"
    assert ana["phone"] == "+351 21 000 1001"  # no phone column: left alone
    async with async_sessionmaker(engine)() as session:
        row = await session.get(ContactRow, "c-101")
        assert row is not None and row.attributes == {}  # the empty cell removed the key
        new = await session.get(ContactRow, "c-999")
        assert new is not None and new.attributes == {"preferred_language": "fr"}


async def test_extra_columns_are_attributes(store: CrmStore, tmp_path: Path) -> None:
    accounts = write(
        tmp_path / "accounts.csv",
        "ID,Name,Industry,Website, Segment \nacc-1,Acme,Retail,https://acme.example,B2B\n",
    )
    await store.import_csv(None, accounts)
    account = await store.get_account("acc-1")
    assert account is not None
    assert account["industry"] == "Retail"
    assert account["tier"] is None
    assert account["attributes"] == {"website": "https://acme.example", "segment": "B2B"}
    assert account["contacts"] == []


async def test_a_contact_may_use_an_account_already_in_the_database(
    store: CrmStore, tmp_path: Path
) -> None:
    await store.import_csv(None, EXAMPLES / "accounts.csv")
    contacts = write(tmp_path / "c.csv", CONTACTS_HEADER + "c-1,Zoe Park,,,,acc-004\n")
    summary = await store.import_csv(contacts, None)
    assert summary.contacts_created == 1


async def test_byte_order_mark_and_quoted_newlines(store: CrmStore, tmp_path: Path) -> None:
    accounts = write(
        tmp_path / "accounts.csv",
        "\ufeff" + ACCOUNTS_HEADER + 'acc-1,Acme,,,,"line one\nline two"\nacc-2,Globex,,,,\n',
    )
    await store.import_csv(None, accounts)
    account = await store.get_account("acc-1")
    assert account is not None and account["notes"] == "line one\nline two"


BAD_CASES = {
    "missing id": (CONTACTS_HEADER + "c-1,Ana,,,,\n,Bob,,,,\n", 3, "id is empty"),
    "missing name": (CONTACTS_HEADER + "c-1,Ana,,,,\nc-2, ,,,,\n", 3, "name is empty"),
    "duplicate id": (
        CONTACTS_HEADER + "c-1,Ana,,,,\nc-2,Bob,,,,\nc-1,Eve,,,,\n",
        4,
        "duplicate id 'c-1' (first on line 2)",
    ),
    "missing header": (
        "id,email\nc-1,a@b.c\n",
        1,
        "missing required column name (the header has: id, email)",
    ),
    "too many fields": (CONTACTS_HEADER + "c-1,Ana,,,,,extra\n", 2, "expected 6 fields, found 7"),
    "too few fields": (CONTACTS_HEADER + "c-1,Ana\n", 2, "expected 6 fields, found 2"),
    "unknown account": (
        CONTACTS_HEADER + "c-1,Ana,,,,acc-404\n",
        2,
        "account_id 'acc-404' is in neither accounts.csv nor the database",
    ),
    "too long": (CONTACTS_HEADER + f"{'x' * 65},Ana,,,,\n", 2, "id is longer than 64"),
    "unterminated quote": (
        CONTACTS_HEADER + 'c-0,A,,,,\nc-1,"Ana,,,,\nc-2,B,,,,\n',
        3,
        "malformed CSV",
    ),
    "empty file": ("", 1, "the file is empty"),
    "duplicate column": ("id,name,name\n", 1, "column 'name' appears twice"),
}


@pytest.mark.parametrize("case", BAD_CASES)
async def test_a_bad_row_imports_nothing(
    store: CrmStore, engine: AsyncEngine, tmp_path: Path, case: str
) -> None:
    text, line, message = BAD_CASES[case]
    accounts = write(tmp_path / "accounts.csv", ACCOUNTS_HEADER + "acc-1,Acme,,,,\n")
    contacts = write(tmp_path / "contacts.csv", text)
    with pytest.raises(CrmImportError) as caught:
        await store.import_csv(contacts, accounts)
    assert f"{contacts}:{line}: {message}" in str(caught.value)
    assert str(caught.value).startswith("CRM import failed, nothing was imported")
    assert await counts(engine) == (0, 0)  # the good accounts file was not imported either


async def test_invalid_utf8(store: CrmStore, engine: AsyncEngine, tmp_path: Path) -> None:
    contacts = write(
        tmp_path / "contacts.csv",
        (CONTACTS_HEADER + "c-1,Ana,,,,\nc-2,Jos").encode() + b"\xe9,,,,\n",
    )
    with pytest.raises(CrmImportError) as caught:
        await store.import_csv(contacts, None)
    assert caught.value.problems == [
        f"{contacts}:3: not valid UTF-8 (byte 0xe9 at column 8); save the file as UTF-8"
    ]
    assert await counts(engine) == (0, 0)


async def test_an_update_is_not_half_applied(store: CrmStore, tmp_path: Path) -> None:
    await store.import_csv(EXAMPLES / "contacts.csv", EXAMPLES / "accounts.csv")
    contacts = write(
        tmp_path / "contacts.csv",
        CONTACTS_HEADER + "c-101,Ana Changed,,,,acc-001\nc-102,,,,,acc-001\n",
    )
    with pytest.raises(CrmImportError):
        await store.import_csv(contacts, None)
    (ana,) = await store.find_contacts("ana lima")
    assert ana["name"] == "Ana Lima"


async def test_problems_are_listed_in_order_and_capped(store: CrmStore, tmp_path: Path) -> None:
    rows = "".join(f",Nobody {n},,,,\n" for n in range(30))
    contacts = write(tmp_path / "contacts.csv", CONTACTS_HEADER + rows)
    accounts = write(tmp_path / "accounts.csv", "id,name\nacc-1,\n")
    with pytest.raises(CrmImportError) as caught:
        await store.import_csv(contacts, accounts)
    error = caught.value
    assert error.total == 31
    assert len(error.problems) == 20
    lines = str(error).splitlines()
    assert lines[0] == "CRM import failed, nothing was imported (31 problems):"
    # the files' problems in file then line order
    assert lines[1:3] == [f"{accounts}:2: name is empty", f"{contacts}:2: id is empty"]
    assert lines[-1] == "... and 11 more"


# ---- the command


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.chdir(tmp_path)  # no .env from the working directory
    # the command configures logging on the root logger; give it back afterwards
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield CliRunner()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_command_imports(runner: CliRunner, database_url: str) -> None:
    result = runner.invoke(
        crm,
        [
            "import",
            "--contacts",
            str(EXAMPLES / "contacts.csv"),
            "--accounts",
            str(EXAMPLES / "accounts.csv"),
        ],
        env={"DATABASE_URL": database_url},
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "Imported 8 contacts (8 new) and 4 accounts (4 new).\n"
    again = runner.invoke(
        crm,
        ["import", "--accounts", str(EXAMPLES / "accounts.csv")],
        env={"DATABASE_URL": database_url},
    )
    assert again.stdout == "Imported 4 accounts (4 updated).\n"


def test_command_reports_bad_rows(runner: CliRunner, database_url: str, tmp_path: Path) -> None:
    contacts = write(tmp_path / "contacts.csv", CONTACTS_HEADER + "c-1,,,,,\n")
    result = runner.invoke(
        crm, ["import", "--contacts", str(contacts)], env={"DATABASE_URL": database_url}
    )
    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"{contacts}:2: name is empty" in result.stderr.splitlines()


def test_command_needs_a_file(runner: CliRunner) -> None:
    result = runner.invoke(crm, ["import"])
    assert result.exit_code == 2
    assert "--contacts FILE, --accounts FILE or both" in result.stderr
