"""A new issue's fields, and finding it by its marker label when the create's answer was
lost (or the bot restarted during it): a create is never sent twice.

Each new issue carries a unique ``bot-...`` label (the call's marker). When the outcome is
unclear, Jira is searched for that label: found, the issue's key is the result; not found,
the model is told it was most likely not created, and how to check.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from jira import JIRAError

from bot.errors import ToolError
from bot.tools.jira.client import MIN_REQUEST_S, JiraConnection, deadline
from bot.tools.jira.errors import OutcomeUnknown

log = logging.getLogger(__name__)

#: Jira's own limit on a summary
JIRA_SUMMARY_MAX = 255
#: a description longer than this is refused rather than sent (Jira's limit is 32,767)
CREATE_DESCRIPTION_MAX = 30_000
#: pauses between searches for the label: a new issue can take a moment to be searchable
SEARCH_PAUSES_S = (0.0, 1.0, 2.0)


def issue_fields(
    project: str,
    summary: str,
    description: str,
    issue_type: str,
    priority: str | None,
    labels: list[str],
    marker: str,
) -> dict[str, Any]:
    """The ``fields`` of the create; ToolError for what Jira would refuse anyway."""
    summary = " ".join(summary.split())
    if not summary:
        raise ToolError("The summary is empty; give a one-line summary.")
    if len(summary) > JIRA_SUMMARY_MAX:
        raise ToolError(
            f"The summary has {len(summary)} characters; Jira allows {JIRA_SUMMARY_MAX}. "
            "Shorten it and put the details in the description."
        )
    if len(description) > CREATE_DESCRIPTION_MAX:
        raise ToolError(
            f"The description has {len(description)} characters; keep it under "
            f"{CREATE_DESCRIPTION_MAX}."
        )
    all_labels = [_label(x) for x in labels if x.strip()]
    fields: dict[str, Any] = {
        "project": {"key": project},
        "issuetype": {"name": issue_type.strip() or "Task"},
        "summary": summary,
        "description": description,
        "labels": list(dict.fromkeys([*all_labels, marker])),
    }
    if priority and priority.strip():
        fields["priority"] = {"name": priority.strip()}
    return fields


def create_issue(
    jira: JiraConnection, project: str, attempts: list[dict[str, Any]], marker: str
) -> dict[str, Any]:
    """Create the issue with the first of ``attempts`` (its fields) that Jira takes: one
    Jira refuses for its reporter (400 naming the field: the bot may not set it) gives way
    to the next, and the result says so (``reporter_refused``). An answer lost is looked up
    by ``marker``, never sent again."""
    client = jira.client()
    refused = False

    def create() -> Any:
        nonlocal refused
        for number, fields in enumerate(attempts, 1):
            try:
                return client.create_issue(fields=fields, prefetch=False)
            except JIRAError as exc:
                if number == len(attempts) or not _refuses_reporter(exc):
                    raise
                refused = True
        raise AssertionError("no attempt")  # the last attempt returns or raises

    with deadline(jira.time_limit) as until:
        try:
            issue = jira.call(create, action=f"create an issue in {project}", write=True)
        except OutcomeUnknown as unknown:
            return recover_create(jira, project, marker, unknown.reason, until)
    key = (issue.raw or {}).get("key") or issue.key
    log.info("jira: created %s", key)
    result: dict[str, Any] = {"key": key, "url": jira.issue_url(key)}
    if refused:
        result["reporter_refused"] = True
    return result


def _refuses_reporter(exc: JIRAError) -> bool:
    if exc.status_code != 400 or exc.response is None:
        return False
    try:
        errors = exc.response.json().get("errors")
    except (ValueError, AttributeError):
        return False
    return isinstance(errors, dict) and "reporter" in errors


def recover_create(
    jira: JiraConnection, project: str, marker: str, reason: str, until: float
) -> dict[str, Any]:
    """The create's answer was lost (``reason``): find out, by its marker label, whether
    the issue exists. Never creates one."""
    log.warning("jira: create in %s: %s; looking for label %s", project, reason, marker)
    jql = f'project = "{project}" AND labels = "{marker}"'
    checked = False
    for pause in SEARCH_PAUSES_S:
        if pause:
            if time.monotonic() + pause + MIN_REQUEST_S > until:
                break
            time.sleep(pause)
        try:
            data = jira.search(jql, 1, ["summary"])
        except ToolError:
            continue
        checked = True
        found = data.get("issues") or []
        if found:
            key = found[0].get("key")
            return {
                "key": key,
                "url": jira.issue_url(key),
                "note": f"Jira's answer was lost ({reason}), but a search shows the "
                "issue was created. It was not sent again.",
            }
    if checked:
        raise ToolError(
            f"Creating the issue in {project} failed ({reason}) and a search for it "
            f"(labels = {marker}) finds nothing, so it was most likely not created. It was "
            "not sent again automatically; to be sure, search for that label before "
            "trying again."
        )
    raise ToolError(
        f"Creating the issue in {project} failed ({reason}) and Jira could not be searched "
        f"to check whether it exists. It was not sent again, to avoid a duplicate: search "
        f"for 'labels = {marker}' later before trying again."
    )


def _label(value: str) -> str:
    return "-".join(value.split())[:255]
