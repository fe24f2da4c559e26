"""The fake Salesforce through the real simple-salesforce client and requests, over HTTPS
with the test run's CA: the token, SOQL as Salesforce parses it, errors as JSON arrays, an
expired session, the Task create, connections counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from simple_salesforce.api import Salesforce
from simple_salesforce.exceptions import (
    SalesforceExpiredSession,
    SalesforceMalformedRequest,
)
from simple_salesforce.format import format_soql

from tests.fakes.salesforce_server import FakeSalesforce
from tests.fakes.tls import ca_file

pytestmark = pytest.mark.xdist_group("salesforce_fake")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeSalesforce]:
    with FakeSalesforce(client_id="cid", client_secret="csecret") as served:
        acme = served.add_account("Acme Corp", owner="Maria Silva", Industry="Manufacturing")
        served.add_contact("Ana Lima", email="ana.lima@acme.example", account=acme)
        served.add_contact("Sean O'Brien", email="sean@acme.example", account=acme)
        served.add_contact("Percent 100% Guy", email="pct@else.example")
        yield served


def login(fake: FakeSalesforce, secret: str = "csecret") -> requests.Response:
    form = {"grant_type": "client_credentials", "client_id": "cid", "client_secret": secret}
    return requests.post(f"{fake.url}/services/oauth2/token", data=form, verify=str(ca_file()))


def client(fake: FakeSalesforce) -> Salesforce:
    token = login(fake).json()
    session = requests.Session()
    session.verify = str(ca_file())
    session.trust_env = False  # the machine's REQUESTS_CA_BUNDLE would replace the CA
    return Salesforce(
        instance_url=token["instance_url"],
        session_id=token["access_token"],
        session=session,
        version="67.0",
    )


def errors(info: pytest.ExceptionInfo) -> list[dict[str, str]]:  # type: ignore[type-arg]
    """The error body, which simple-salesforce keeps parsed."""
    return info.value.content  # type: ignore[no-any-return]


def test_the_token_comes_with_the_instance_and_the_org(fake: FakeSalesforce) -> None:
    answer = login(fake).json()
    assert answer["instance_url"] == fake.url and answer["token_type"] == "Bearer"
    assert "/id/00D" in answer["id"]
    refused = login(fake, secret="wrong")
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "invalid_client",
        "error_description": "invalid client credentials",
    }


def test_soql_with_escaped_values(fake: FakeSalesforce) -> None:
    sf = client(fake)
    like = "SELECT Id, Name, Account.Name FROM Contact WHERE Name LIKE '%{:like}%' ORDER BY Name"
    found = sf.query(format_soql(like, "o'brien"))
    assert [(r["Name"], r["Account"]["Name"]) for r in found["records"]] == [
        ("Sean O'Brien", "Acme Corp")
    ]
    assert sf.query(format_soql(like, "100%"))["totalSize"] == 1
    assert sf.query(format_soql(like, "' OR Name LIKE '%"))["totalSize"] == 0
    children = "(SELECT Name FROM Contacts ORDER BY Name DESC LIMIT 1)"
    (acme,) = sf.query(f"SELECT Name, {children} FROM Account WHERE Name = 'acme corp'")["records"]
    assert [c["Name"] for c in acme["Contacts"]["records"]] == ["Sean O'Brien"]
    counted = sf.query("SELECT COUNT() FROM Contact WHERE Email LIKE '%acme%'")
    assert counted["totalSize"] == 2 and counted["records"] == []


@pytest.mark.parametrize(
    ("soql", "code"),
    [
        ("SELECT Id FROM Contact WHERE Name LIKE '%O'Brien%'", "MALFORMED_QUERY"),
        (
            "SELECT Id FROM Contact WHERE Name = 'a' OR Name = 'b' AND Email = 'c'",
            "MALFORMED_QUERY",
        ),
        ("SELECT Id FROM Contact WHERE Name = 'a\\q'", "MALFORMED_QUERY"),
        ("SELECT Id FROM Contact WHERE Name = '50\\%'", "MALFORMED_QUERY"),
        ("SELECT Id FROM Contact LIMIT", "MALFORMED_QUERY"),
        ("SELECT Nickname FROM Contact", "INVALID_FIELD"),
        ("SELECT Id, Owner.Name FROM Contact", "INVALID_FIELD"),
        ("SELECT Id FROM Task WHERE Description LIKE '%bot-1%'", "INVALID_FIELD"),
        ("SELECT Id FROM Widget", "INVALID_TYPE"),
        ("SELECT Id, (SELECT Id FROM Colleagues) FROM Account", "INVALID_TYPE"),
        ("SELECT Id FROM Contact WHERE Id = 'nope'", "INVALID_QUERY_FILTER_OPERATOR"),
    ],
)
def test_what_salesforce_refuses(fake: FakeSalesforce, soql: str, code: str) -> None:
    with pytest.raises(SalesforceMalformedRequest) as info:
        client(fake).query(soql)
    (error,) = errors(info)
    assert error["errorCode"] == code and error["message"]


def test_an_expired_session_is_refused_as_salesforce_does(fake: FakeSalesforce) -> None:
    sf = client(fake)
    fake.expire_token()
    with pytest.raises(SalesforceExpiredSession) as info:
        sf.query("SELECT Id FROM Contact")
    assert errors(info) == [
        {"message": "Session expired or invalid", "errorCode": "INVALID_SESSION_ID"}
    ]


def test_a_task_on_a_contact_is_created_and_found_by_its_subject(fake: FakeSalesforce) -> None:
    sf = client(fake)
    ana = sf.query("SELECT Id FROM Contact WHERE Name = 'ana lima'")["records"][0]["Id"]
    task = {
        "WhoId": ana,
        "Subject": "Call [bot-1234567890]",
        "Description": "x",
        "Status": "Completed",
    }
    created = sf.restful("sobjects/Task/", method="POST", json=task)
    assert created["success"] and created["id"].startswith("00T")
    found = sf.query(
        format_soql("SELECT Id FROM Task WHERE Subject LIKE '%{:like}'", "[bot-1234567890]")
    )
    assert [r["Id"] for r in found["records"]] == [created["id"]]
    with pytest.raises(SalesforceMalformedRequest) as info:
        sf.restful("sobjects/Task/", method="POST", json={**task, "Mood": "happy"})
    assert errors(info)[0]["errorCode"] == "INVALID_FIELD"
    with pytest.raises(SalesforceMalformedRequest) as info:
        sf.restful("sobjects/Task/", method="POST", json={**task, "Subject": "x" * 256})
    assert errors(info)[0]["errorCode"] == "STRING_TOO_LONG"


def test_one_session_is_one_connection(fake: FakeSalesforce) -> None:
    fake.reset()
    sf = client(fake)
    for _ in range(3):
        sf.query("SELECT Id FROM Account")
    # the token's request on a connection of its own (requests.post), the rest on one
    assert fake.connections == 2 and len(fake.requests) == 4
