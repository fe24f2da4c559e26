"""The fake Slack's uploads are as strict as Slack's: three steps, the URL takes the
announced bytes once, and an upload is completed once, with the bot token only."""

from __future__ import annotations

import httpx
import pytest
from slack_sdk.errors import SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.conftest import api_error
from tests.fakes.slack_server import FakeSlack


async def test_files_upload_v2_shares_the_file_in_the_thread(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    thread_ts = slack.add_message("C1", "a question")

    done = await slack_client.files_upload_v2(
        channel="C1", thread_ts=thread_ts, filename="a.md", title="A", content="# Hi\n"
    )

    (upload,) = slack.uploaded_files
    assert upload == {
        "id": done["file"]["id"],
        "name": "a.md",
        "title": "A",
        "content": b"# Hi\n",
        "channel": "C1",
        "thread_ts": thread_ts,
        "initial_comment": None,
    }
    (shared,) = [m for m in slack.thread("C1", thread_ts) if m.get("files")]
    assert shared["user"] == "UBOT" and shared["files"][0]["name"] == "a.md"


async def test_the_upload_url_takes_the_announced_bytes_once(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    given = await slack_client.files_getUploadURLExternal(filename="a.md", length=3)
    url = given["upload_url"]

    async with httpx.AsyncClient() as http:
        short = await http.post(url, content=b"ab")
        taken = await http.post(url, content=b"abc")
        again = await http.post(url, content=b"abc")

    assert [short.status_code, taken.status_code, again.status_code] == [400, 200, 404]
    files = [{"id": given["file_id"], "title": "a"}]
    await slack_client.files_completeUploadExternal(files=files, channel_id="C1")
    twice = await api_error(slack_client.files_completeUploadExternal(files=files))
    assert twice.response["error"] == "file_not_found"
    assert [u["content"] for u in slack.uploaded_files] == [b"abc"]


async def test_an_upload_not_received_or_unknown_is_not_completed(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    given = await slack_client.files_getUploadURLExternal(filename="a.md", length=3)

    for file_id in (given["file_id"], "F404"):
        error = await api_error(
            slack_client.files_completeUploadExternal(files=[{"id": file_id}], channel_id="C1")
        )
        assert error.response["error"] == "file_not_found"
    empty = await api_error(slack_client.files_getUploadURLExternal(filename="a.md", length=0))
    assert empty.response["error"] == "missing_argument"
    other = AsyncWebClient(token="xoxb-other", base_url=slack.api_url)
    refused = await api_error(other.files_getUploadURLExternal(filename="a.md", length=3))
    assert refused.response["error"] == "invalid_auth"
    assert slack.uploaded_files == []


async def test_a_refused_upload_fails_files_upload_v2(
    slack: FakeSlack, slack_client: AsyncWebClient
) -> None:
    slack.fail_upload_next(503)

    with pytest.raises(SlackRequestError, match="status: 503"):
        await slack_client.files_upload_v2(channel="C1", filename="a.md", content="hi")

    assert slack.uploaded_files == [] and slack.calls_to("files.completeUploadExternal") == []
