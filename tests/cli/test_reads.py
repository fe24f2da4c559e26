"""Commands that read what is stored, and ``bot crm list|show``, through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import import_examples, one_line, run_bot


@pytest.mark.parametrize(
    "command",
    [
        ["history", "list"],
        ["history", "show", "C1"],
        ["history", "export"],
        ["db", "current"],
        ["crm", "list"],
        ["crm", "show", "acc-001"],
    ],
    ids=" ".join,
)
def test_a_read_of_a_missing_sqlite_file_is_refused(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "data" / "bot.db"
    (tmp_path / "data").mkdir()
    result = run_bot(*command, cwd=tmp_path, env={"DATABASE_URL": "sqlite:///./data/bot.db"})

    assert result.returncode == 1
    assert one_line(result.stderr).startswith(f"error: no database at {missing}: ")
    assert not missing.exists()


@pytest.fixture
def crm_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'crm.db'}"
    import_examples({"DATABASE_URL": url}, tmp_path)
    return url


def test_crm_list_and_query(tmp_path: Path, crm_url: str) -> None:
    env = {"DATABASE_URL": crm_url}
    every = run_bot("crm", "list", cwd=tmp_path, env=env)
    assert every.returncode == 0, every.stderr
    assert every.stdout.splitlines()[:2] == [
        "Accounts (4):",
        "  acc-001  Acme Corp - Manufacturing, Enterprise, owner Maria Silva, 2 contacts",
    ]
    assert "Contacts (8):" in every.stdout

    acme = run_bot("crm", "list", "--query", "acme", cwd=tmp_path, env=env)
    assert acme.stdout.splitlines() == [
        "Accounts (1):",
        "  acc-001  Acme Corp - Manufacturing, Enterprise, owner Maria Silva, 2 contacts",
        "Contacts (2):",
        "  c-101  Ana Lima - ana.lima@acme.example, Head of Operations, Acme Corp (acc-001)",
        "  c-102  Tom Becker - tom.becker@acme.example, IT Manager, Acme Corp (acc-001)",
    ]
    nothing = run_bot("crm", "list", "--query", "nobody here", cwd=tmp_path, env=env)
    assert (nothing.returncode, nothing.stdout) == (0, "No CRM records match.\n")


def test_crm_show_an_account_with_its_contacts_and_a_contact(tmp_path: Path, crm_url: str) -> None:
    env = {"DATABASE_URL": crm_url}
    account = run_bot("crm", "show", "acc-001", cwd=tmp_path, env=env)
    assert account.returncode == 0, account.stderr
    lines = account.stdout.splitlines()
    assert lines[0] == "Account acc-001: Acme Corp"
    assert "  region        EMEA" in lines
    assert lines[-3:] == [
        "  contacts (2):",
        "    c-101  Ana Lima - ana.lima@acme.example, Head of Operations",
        "    c-102  Tom Becker - tom.becker@acme.example, IT Manager",
    ]

    contact = run_bot("crm", "show", "c-101", "--json", cwd=tmp_path, env=env)
    (shown,) = json.loads(contact.stdout).values()
    assert (shown["name"], shown["account_name"]) == ("Ana Lima", "Acme Corp")
    assert shown["attributes"] == {"preferred_language": "pt"}
    unknown = run_bot("crm", "show", "c-999", cwd=tmp_path, env=env)
    assert unknown.returncode == 1
    assert one_line(unknown.stderr) == "error: no CRM account or contact has the id 'c-999'"


def test_crm_show_keeps_control_characters_off_the_terminal(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crm.db'}"
    (tmp_path / "accounts.csv").write_text(
        'id,name,notes\nacc-9,"Evil\x1b[2J Corp","line one\nline two"\n', encoding="utf-8"
    )
    env = {"DATABASE_URL": url}
    run_bot("crm", "import", "--accounts", str(tmp_path / "accounts.csv"), cwd=tmp_path, env=env)

    shown = run_bot("crm", "show", "acc-9", cwd=tmp_path, env=env)
    assert shown.stdout.splitlines() == [
        "Account acc-9: Evil\\u001b[2J Corp",
        "  notes  line one",
        "         line two",
        "  contacts: none",
    ]
