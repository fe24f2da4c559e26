"""``bot crm check`` against each CRM, both ways; ``bot crm import`` refused when the CRM is
not the bot's own tables; the missing settings of the chosen CRM named in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import load_examples, one_line, run_bot
from tests.crm_fakes import HUBSPOT_TOKEN, hubspot_settings, salesforce_settings
from tests.fakes.hubspot_server import FakeHubSpot
from tests.fakes.salesforce_server import FakeSalesforce
from tests.fakes.tls import tls_settings


def test_check_salesforce(salesforce: FakeSalesforce, tmp_path: Path) -> None:
    result = run_bot("crm", "check", env=salesforce_settings(salesforce), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "CRM: Salesforce",
        f"org: 00D5g000004SbHoEAK at {salesforce.url} (API 67.0)",
        "read contacts: yes (Contact is queryable)",
        "read accounts: yes (Account is queryable)",
        "write notes: yes (Task is createable)",
    ]


def test_check_refuses_a_wrong_secret_in_one_line(
    salesforce: FakeSalesforce, tmp_path: Path
) -> None:
    env = salesforce_settings(salesforce, SALESFORCE_CLIENT_SECRET="not-the-secret")
    result = run_bot("crm", "check", env=env, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    line = one_line(result.stderr)
    assert "invalid_client" in line and "SALESFORCE_CLIENT_SECRET" in line
    assert "not-the-secret" not in line


def test_check_hubspot_names_a_missing_scope_and_a_wrong_token(tmp_path: Path) -> None:
    scopes = ("crm.objects.contacts.read", "crm.objects.companies.read", "oauth")
    with FakeHubSpot(token=HUBSPOT_TOKEN, scopes=scopes) as fake:
        result = run_bot("crm", "check", env=hubspot_settings(fake), cwd=tmp_path)
        wrong = hubspot_settings(fake, HUBSPOT_ACCESS_TOKEN="pat-na1-wrong")
        refused = run_bot("crm", "check", env=wrong, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        "CRM: HubSpot",
        "portal: 24681357 (app-eu1.hubspot.com)",
        "read contacts: yes (scope crm.objects.contacts.read granted)",
        "read companies: yes (scope crm.objects.companies.read granted)",
        "write notes: NO (scope crm.objects.contacts.write not granted)",
    ]
    assert refused.returncode == 2
    assert "HUBSPOT_ACCESS_TOKEN" in one_line(refused.stderr)


def test_check_the_local_tables(sqlite_url: str, tmp_path: Path) -> None:
    load_examples(sqlite_url)
    result = run_bot("crm", "check", env={"DATABASE_URL": sqlite_url}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == [
        "CRM: local",
        "the bot's own tables: 8 contacts, 4 accounts, 0 notes",
    ]


def test_import_is_refused_when_the_crm_is_not_local(tmp_path: Path) -> None:
    env = {"CRM": "hubspot", "HUBSPOT_ACCESS_TOKEN": "pat-x", "DATABASE_URL": "sqlite:///x.db"}
    contacts = tmp_path / "c.csv"
    contacts.write_text("id,name\nc-1,A\n")
    result = run_bot("crm", "import", "--contacts", str(contacts), env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert "CRM=hubspot" in one_line(result.stderr)
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    ("command", "env", "named"),
    [
        (
            ["ask", "--channel", "C1", "hi"],
            {"OPENAI_API_KEY": "k", "CRM": "salesforce", "SALESFORCE_CLIENT_ID": "id"},
            ["SALESFORCE_LOGIN_URL", "SALESFORCE_CLIENT_SECRET"],
        ),
        (
            ["run", "--http"],
            {"OPENAI_API_KEY": "k", "SLACK_SIGNING_SECRET": "s", "CRM": "hubspot"},
            ["SLACK_BOT_TOKEN", "HUBSPOT_ACCESS_TOKEN"],
        ),
    ],
    ids=["ask", "run"],
)
def test_the_crms_missing_settings_are_named_in_one_line(
    tmp_path: Path, command: list[str], env: dict[str, str], named: list[str]
) -> None:
    result = run_bot(*command, env={**env, **tls_settings()}, cwd=tmp_path)
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert all(name in line for name in named), line
    assert "SALESFORCE_CLIENT_ID" not in line
