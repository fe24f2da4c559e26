"""A long answer as a file in its thread: the whole of the model's Markdown as answer.md,
shared with a line saying so (``files:write``), through slack_sdk's ``files_upload_v2``:
files.getUploadURLExternal, the bytes POSTed to the URL it gives, then
files.completeUploadExternal into the thread.

It is an ordinary file, not a snippet: Slack refuses snippets over 1 MB, and answers can be
longer. A step that fails raises one of ``UPLOAD_FAILURES``; the poster then posts the
answer as messages instead, so nothing is lost.
"""

from __future__ import annotations

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.events import Thread

FILE_NAME = "answer.md"
TITLE = "The whole answer"
#: the line the file is shared with, under the answer's first part
NOTE = "The answer is too long for a few messages: here is the whole of it, as a Markdown file."
#: a Web API step refused (SlackApiError), the upload URL refused (SlackRequestError: its
#: HTTP status in the message), or Slack not reached
UPLOAD_FAILURES = (SlackApiError, SlackRequestError, aiohttp.ClientError, TimeoutError)
#: what a failure of the upload URL is counted as (it is not a Web API method)
UPLOAD_URL = "files.upload_url"


async def attach_answer(client: AsyncWebClient, thread: Thread, markdown: str) -> None:
    """Share ``markdown`` in ``thread`` as a file (raises one of ``UPLOAD_FAILURES``)."""
    await client.files_upload_v2(
        channel=thread.channel,
        thread_ts=thread.thread_ts,
        filename=FILE_NAME,
        title=TITLE,
        content=markdown,
        initial_comment=NOTE,
    )


def failed_step(exc: BaseException) -> str:
    """The step that raised ``exc``: its Web API method, else the upload URL."""
    if isinstance(exc, SlackApiError):
        return str(getattr(exc.response, "api_url", "")).rsplit("/", 1)[-1] or UPLOAD_URL
    return UPLOAD_URL
