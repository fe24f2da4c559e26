"""The fake Jira's writes, driven by the real ``jira`` client's own methods (and its session
for API v3): users, assignment, transitions and their screens, comments with properties,
link types and links; rich text checked as Jira checks it on v2 and v3."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from jira import JIRA, JIRAError

from tests.fakes.jira_server import FakeJira

EMAIL, TOKEN, PAT = "bot@example.com", "tok", "pat"
ADF = {
    "type": "doc",
    "version": 1,
    "content": [{"type": "paragraph", "content": [{"type": "text", "text": "Looks good"}]}],
}


@pytest.fixture(scope="module")
def cloud() -> Iterator[FakeJira]:
    with FakeJira(email=EMAIL, api_token=TOKEN, screens={"Done": ["resolution"]}) as fake:
        fake.add_user("Carol Diaz", "carol@example.com")
        fake.add_user("Carol King", "king@example.com")
        fake.add_user("Dan Off", "dan@example.com", assignable=False)
        for number in range(1, 10):
            fake.add_issue(f"TASK-{number}", summary=f"Issue {number}")
        yield fake


@pytest.fixture(scope="module")
def server() -> Iterator[FakeJira]:
    with FakeJira(pat=PAT) as fake:
        fake.add_user("Carol Diaz", "carol@example.com", name="cdiaz")
        fake.add_issue("TASK-1")
        yield fake


def client_of(fake: FakeJira) -> JIRA:
    if fake.deployment == "Cloud":
        return JIRA(fake.url, basic_auth=(EMAIL, TOKEN), max_retries=0)
    return JIRA(fake.url, token_auth=PAT, max_retries=0)


def test_users_are_searched_as_each_deployment_takes_it(cloud: FakeJira, server: FakeJira) -> None:
    jira = client_of(cloud)
    assert jira._is_cloud
    assert [u.displayName for u in jira.search_users(query="carol")] == ["Carol Diaz", "Carol King"]
    assert [u.displayName for u in jira.search_users(query="king@example.com")] == ["Carol King"]
    with pytest.raises(JIRAError) as refused:
        jira.search_users(user="carol")
    assert refused.value.status_code == 400 and "GDPR" in refused.value.text
    found = jira.search_assignable_users_for_issues(query="a", issueKey="TASK-1")
    assert [u.displayName for u in found] == ["Carol Diaz", "Carol King"]  # not Dan Off

    on_server = client_of(server)
    assert not on_server._is_cloud
    (carol,) = on_server.search_users(user="cdiaz")
    assert (carol.name, carol.emailAddress) == ("cdiaz", "carol@example.com")


def test_an_assignment_names_the_user_as_the_deployment_does(
    cloud: FakeJira, server: FakeJira
) -> None:
    jira = client_of(cloud)
    jira.assign_issue("TASK-1", "carol@example.com")  # the client finds the account id
    assert jira.issue("TASK-1").fields.assignee.displayName == "Carol Diaz"
    with pytest.raises(JIRAError) as refused:
        jira.assign_issue("TASK-1", "dan@example.com")
    assert "cannot be assigned" in refused.value.text
    url = f"{cloud.url}/rest/api/2/issue/TASK-1/assignee"
    with pytest.raises(JIRAError):  # Cloud names people by account id only
        jira._session.put(url, data=json.dumps({"name": "carol"}))

    on_server = client_of(server)
    on_server.assign_issue("TASK-1", "cdiaz")
    assert on_server.issue("TASK-1").fields.assignee.name == "cdiaz"


def test_transitions_follow_the_workflow_and_its_screens(cloud: FakeJira) -> None:
    jira = client_of(cloud)
    offered = jira.transitions("TASK-2", expand="transitions.fields")
    assert {t["to"]["name"] for t in offered} == {"In Progress", "Done"}
    done = next(t for t in offered if t["to"]["name"] == "Done")
    assert done["fields"]["resolution"]["required"] is True
    start = next(t for t in offered if t["to"]["name"] == "In Progress")
    assert "fields" in start and start["fields"] == {}

    jira.transition_issue("TASK-2", start["id"])
    assert jira.issue("TASK-2").fields.status.name == "In Progress"
    with pytest.raises(JIRAError) as refused:
        jira.transition_issue("TASK-2", start["id"])  # not offered from where it is now
    assert refused.value.status_code == 400
    with pytest.raises(JIRAError) as needs:
        jira.transition_issue("TASK-2", done["id"])
    assert "Resolution is required" in needs.value.text
    jira.transition_issue("TASK-2", done["id"], fields={"resolution": {"name": "Done"}})
    assert jira.issue("TASK-2").fields.status.name == "Done"


def test_comments_carry_properties_and_rich_text_is_checked_per_version(
    cloud: FakeJira, server: FakeJira
) -> None:
    jira = client_of(cloud)
    jira.add_comment("TASK-3", "Plain *wiki* text")
    v3 = f"{cloud.url}/rest/api/3/issue/TASK-3/comment"
    made = jira._session.post(
        v3, data=json.dumps({"body": ADF, "properties": [{"key": "bot.marker", "value": {"m": 1}}]})
    ).json()
    assert made["body"] == ADF
    for wrong, url in (("a string", v3), (ADF, v3.replace("/3/", "/2/"))):
        with pytest.raises(JIRAError) as refused:
            jira._session.post(url, data=json.dumps({"body": wrong}))
        assert refused.value.status_code == 400
    bad = {"type": "doc", "version": 1, "content": [{"type": "text", "text": "loose"}]}
    with pytest.raises(JIRAError):
        jira._session.post(v3, data=json.dumps({"body": bad}))

    newest_first = jira.comments("TASK-3", expand="properties", order_by="-created")
    assert [c.body for c in newest_first] == ["Looks good", "Plain *wiki* text"]
    assert newest_first[0].raw["properties"] == [{"key": "bot.marker", "value": {"m": 1}}]
    assert "properties" not in jira.comments("TASK-3")[0].raw
    issue = jira._session.get(f"{cloud.url}/rest/api/3/issue/TASK-3?fields=comment").json()
    assert issue["fields"]["comment"]["comments"][1]["body"] == ADF

    with pytest.raises(JIRAError) as missing:  # Server has no API v3
        client_of(server)._session.post(
            f"{server.url}/rest/api/3/issue/TASK-1/comment", data=json.dumps({"body": ADF})
        )
    assert missing.value.status_code == 404


def test_links_are_made_by_type_and_read_from_either_side(cloud: FakeJira) -> None:
    jira = client_of(cloud)
    types = {t.name: (t.inward, t.outward) for t in jira.issue_link_types(force=True)}
    assert types["Blocks"] == ("is blocked by", "blocks")
    jira.create_issue_link("Blocks", "TASK-4", "TASK-5")  # TASK-4 blocks TASK-5
    (from_four,) = jira.issue("TASK-4", fields="issuelinks").raw["fields"]["issuelinks"]
    assert from_four["outwardIssue"]["key"] == "TASK-5"
    (from_five,) = jira.issue("TASK-5", fields="issuelinks").raw["fields"]["issuelinks"]
    assert from_five["inwardIssue"]["key"] == "TASK-4"
    jira.create_issue_link("Blocks", "TASK-4", "TASK-5")  # once is enough
    assert len(cloud.links) == 1
    with pytest.raises(JIRAError):
        jira.create_issue_link("Nonsense", "TASK-4", "TASK-6")


def test_an_edit_takes_rich_text_per_version(cloud: FakeJira) -> None:
    jira = client_of(cloud)
    v2, v3 = (f"{cloud.url}/rest/api/{n}/issue/TASK-7" for n in (2, 3))
    jira._session.put(
        v3, data=json.dumps({"fields": {"description": ADF, "duedate": "2030-01-31"}})
    )
    assert jira.issue("TASK-7").fields.description == "Looks good"
    assert jira.issue("TASK-7").fields.duedate == "2030-01-31"
    for url, wrong in ((v3, "text"), (v2, ADF)):
        with pytest.raises(JIRAError) as refused:
            jira._session.put(url, data=json.dumps({"fields": {"description": wrong}}))
        assert refused.value.status_code == 400
        assert "Atlassian Document" in refused.value.text or "a string" in refused.value.text
    with pytest.raises(JIRAError) as refused:
        jira._session.put(v2, data=json.dumps({"fields": {"status": {"name": "Done"}}}))
    assert "cannot be set" in refused.value.text
