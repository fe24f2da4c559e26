"""Files attached to a question reach the model (both API modes): an image as image input,
a text file as text within the budget, any other file named with its type. The bot fetches
them from Slack with its token; the history keeps only a reference to each. A file too
large, or one that cannot be had, is a note to the model, never a failed turn."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Reply, Request
from tests.fakes.slack_server import FakeSlack
from tests.scenarios.slack.conftest import Clock, Database, RunningBot, dm, mention, turn_finished

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
CSV = b"account,tier,owner\nAcme,gold,Ana\nGlobex,silver,Bo\n"
MB = 1_000_000


@pytest.fixture(params=["chat", "responses"])
def api(request: pytest.FixtureRequest) -> str:
    return request.param


def user_turns(request: Request) -> list[Any]:
    """The content of each user message the model got, oldest first (both API modes)."""
    conversation = request.body.get("messages") or request.body.get("input") or []
    return [m["content"] for m in conversation if m.get("role") == "user"]


def parts_of(content: Any) -> tuple[str, list[str]]:
    """(the text, the image URLs) of a user message's content in either mode."""
    if isinstance(content, str):
        return content, []
    text = "".join(p["text"] for p in content if p["type"] in ("text", "input_text"))
    images = [
        p["image_url"]["url"] if p["type"] == "image_url" else p["image_url"]
        for p in content
        if p["type"] in ("image_url", "input_image")
    ]
    return text, images


def shared(channel: str, ts: str, text: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    """A DM with files, as Slack sends it (``file_share``)."""
    return dm(channel, ts, text, subtype="file_share", files=files)


async def ask(
    bot: RunningBot, slack: FakeSlack, event: dict[str, Any], thread: str | None = None
) -> None:
    assert (await bot.send(event)).status_code == 200
    await slack.wait_for(turn_finished(event["channel"], event["ts"]), timeout=15)
    await bot.idle()


@pytest.mark.parametrize("where", ["dm", "mention"])
async def test_an_image_and_a_csv_reach_the_model_and_are_stored_as_references(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    db: Database,
    clock: Clock,
    api: str,
    where: str,
) -> None:
    bot = start_bot(LLM_API=api)
    image = fake_slack.add_file("error.png", PNG, "image/png", filetype="png")
    sheet = fake_slack.add_file("accounts.csv", CSV, "text/csv", filetype="csv")
    fake_openai.script(Reply(text="The screenshot shows an error."), Reply(text="Acme is gold."))
    ts = clock.ts()
    if where == "dm":
        channel, event = "D1", shared("D1", ts, "what do these show?", [image, sheet])
    else:
        channel = "C1"
        event = mention("C1", ts, "what do these show?", files=[image, sheet])
    await ask(bot, fake_slack, event)

    text, images = parts_of(user_turns(fake_openai.requests[0])[-1])
    assert images == ["data:image/png;base64," + base64.b64encode(PNG).decode()]
    assert text.startswith("what do these show?")
    assert "Contents of the attached file 'accounts.csv' (text/csv):" in text
    assert "Globex,silver,Bo" in text
    assert [d["id"] for d in fake_slack.file_downloads] == [image["id"], sheet["id"]]
    assert all(d["authorized"] for d in fake_slack.file_downloads)
    assert any("screenshot shows" in m["text"] for m in fake_slack.messages(channel))

    (stored, _) = await db.history.messages(channel)
    assert stored.content == (
        "what do these show?\n"
        f"[attached file 'error.png': image/png, {len(PNG):,} bytes, id {image['id']}]\n"
        f"[attached file 'accounts.csv': text/csv, {len(CSV):,} bytes, id {sheet['id']}]"
    )

    # the next turn replays the reference only: no image, no contents
    follow = dm(channel, clock.ts(), "and the tier?") if where == "dm" else None
    await ask(bot, fake_slack, follow or mention("C1", clock.ts(), "and the tier?"))
    earlier, latest = user_turns(fake_openai.requests[1])[-2:]
    assert earlier == stored.content
    assert parts_of(latest) == (latest, [])
    assert len(fake_slack.file_downloads) == 2  # nothing fetched again


async def test_a_50_mb_attachment_is_refused_without_fetching_it(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    huge = fake_slack.add_file("dump.log", b"x" * (50 * MB), "text/plain", filetype="log")
    fake_openai.script(Reply(text="That file is too large for me to read."))

    await ask(bot, fake_slack, shared("D1", clock.ts(), "what is in this log?", [huge]))

    assert fake_slack.file_downloads == []
    text, _ = parts_of(user_turns(fake_openai.requests[0])[-1])
    assert "'dump.log' (text/plain) was not read: it is larger (50.0 MB)" in text
    assert "limit" in text
    assert any("too large" in m["text"] for m in fake_slack.messages("D1"))


async def test_a_file_larger_than_it_said_stops_at_the_cap(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    big = b"\x89PNG\r\n\x1a\n" + bytes(50 * MB)
    liar = fake_slack.add_file("shot.png", big, "image/png", size=1000)
    fake_openai.script(Reply(text="I could not read that image."))

    await ask(bot, fake_slack, shared("D1", clock.ts(), "see this?", [liar]))

    (download,) = fake_slack.file_downloads
    assert 10 * MB <= download["served"] < 50 * MB  # the read stopped past the cap
    text, images = parts_of(user_turns(fake_openai.requests[0])[-1])
    assert images == [] and "larger than the 10.0 MB limit" in text


async def test_failures_and_unreadable_files_are_notes_to_the_model(
    bot: RunningBot, fake_slack: FakeSlack, fake_openai: FakeOpenAI, clock: Clock
) -> None:
    archive = fake_slack.add_file("logs.zip", b"PK\x03\x04", "application/zip", filetype="zip")
    hidden = fake_slack.add_file("notes.md", b"# Notes", "text/markdown", check_file_info=True)
    gone = {**fake_slack.add_file("a.txt", b"a", "text/plain"), "url_private_download": None}
    gone["url_private"] = gone["url_private"].replace("a.txt", "b.txt")  # 404
    fake_slack.fail_next("files.info", "file_not_found")
    fake_openai.script(Reply(text="I could read none of those."))

    await ask(bot, fake_slack, shared("D1", clock.ts(), "read these", [archive, hidden, gone]))

    text, _ = parts_of(user_turns(fake_openai.requests[0])[-1])
    assert "'logs.zip' (application/zip) was not read: this kind of file cannot be read" in text
    assert "'notes.md' (text/markdown) was not read: Slack would not say where" in text
    assert "'a.txt' (text/plain) was not read: Slack refused to hand it over (HTTP 404)" in text
    assert [d["id"] for d in fake_slack.file_downloads] == [gone["id"]]  # no zip fetched
    assert any("none of those" in m["text"] for m in fake_slack.messages("D1"))


async def test_a_file_slack_connect_hides_is_found_with_files_info_and_cut_to_budget(
    start_bot: Callable[..., RunningBot],
    fake_slack: FakeSlack,
    fake_openai: FakeOpenAI,
    clock: Clock,
) -> None:
    bot = start_bot(FILE_TEXT_TOKENS=50, FILE_MAX_BYTES=100 * MB)
    lines = b"".join(b"line %d of a long log\n" % n for n in range(1_000_000))
    hidden = fake_slack.add_file("app.log", lines, "text/plain", check_file_info=True)
    fake_openai.script(Reply(text="The log starts at line 0."))

    await ask(bot, fake_slack, shared("D1", clock.ts(), "first lines?", [hidden]))

    assert [c.args["file"] for c in fake_slack.calls_to("files.info")] == [hidden["id"]]
    text, _ = parts_of(user_turns(fake_openai.requests[0])[-1])
    assert "line 0 of a long log" in text and "line 999999" not in text
    assert "[The file was cut here: attached text is limited to 50 tokens.]" in text
    (download,) = fake_slack.file_downloads
    # only as much as the budget could use (and what the sockets held before it stopped)
    assert download["served"] < len(lines) // 2
