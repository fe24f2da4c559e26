"""The admin pages in a real browser (Debian's Chromium through Playwright): log in, review
a transcript, filter failed turns, delete through the confirmation; stored XSS stays inert.

Screenshots of the sessions list and a transcript land in test-artifacts/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.fakes.serve import ServedApp
from tests.web.test_admin_api import IMAGE, LINK, SCRIPT, TOKEN, seed_history, serve_admin

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="Chromium is not installed at /usr/bin/chromium (apt-get install chromium)",
    ),
]


@pytest.fixture
def site(sqlite_url: str) -> Iterator[ServedApp]:
    seed_history(sqlite_url)
    with serve_admin(sqlite_url) as served:
        yield served


@pytest.fixture
def page(site: ServedApp) -> Iterator[Page]:
    # started after the site: sync Playwright holds an event loop on this thread, and the
    # seeding above runs its own
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        context = browser.new_context(base_url=site.url, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        csp_violations: list[str] = []
        page.on(
            "console",
            lambda message: (
                "Content Security Policy" in message.text and csp_violations.append(message.text)
            ),
        )
        yield page
        browser.close()
    assert csp_violations == [], "the pages must work under their own CSP"


def log_in(page: Page, token: str = TOKEN) -> None:
    page.goto("/admin/")
    page.get_by_label("Admin token").fill(token)
    page.get_by_role("button", name="Log in").click()


def test_a_wrong_token_is_refused(page: Page) -> None:
    log_in(page, token="guess")

    expect(page.get_by_role("alert")).to_have_text("Wrong token.")
    expect(page.get_by_label("Admin token")).to_be_visible()
    assert page.context.cookies() == []
    page.goto("/admin/sessions/C0123")
    expect(page.get_by_text("TASK-1")).to_have_count(0)


def test_review_a_session_with_tool_calls(page: Page) -> None:
    log_in(page)

    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    expect(page.locator("tbody tr")).to_have_count(2)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "admin-sessions.png", full_page=True)

    page.locator("th a[data-sort=messages]").click()
    expect(page.locator("tbody tr").first).to_contain_text("C0123")
    page.get_by_role("searchbox").fill("quarterly")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("tbody tr")).to_contain_text("D0456")

    page.goto("/admin/")
    page.get_by_role("link", name="C0123").click()
    expect(page.get_by_role("heading", name="Session C0123")).to_be_visible()
    expect(page.locator("section.turn")).to_have_count(4)
    call = page.locator(".tool-call").first
    expect(call).to_contain_text("jira_get_issue")
    expect(call.locator("pre.arguments")).to_have_text('{\n  "issue_key": "TASK-1"\n}')
    result = call.locator("details.tool-result")
    expect(result.locator("pre")).not_to_be_visible()  # collapsed until asked for
    result.locator("summary").click()
    expect(result.locator("pre")).to_be_visible()
    expect(result.locator("pre")).to_contain_text('"summary": "Login form 🚀"')
    page.screenshot(path=ARTIFACTS / "admin-transcript.png", full_page=True)

    # stored XSS attempts are shown as the text they are, and do nothing
    expect(page.get_by_text(SCRIPT, exact=True)).to_be_visible()
    expect(page.get_by_text(IMAGE + LINK)).to_be_visible()
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("main img, main script, main a[href^='javascript']").count() == 0

    page.get_by_role("link", name="Failed or capped (2)").click()
    expect(page.locator("section.turn")).to_have_count(2)
    expect(page.locator(".outcome", has_text="max_rounds").first).to_be_visible()
    expect(page.get_by_text("TASK-1 is open")).to_have_count(0)
    failing = page.locator("details.tool-result.failed")
    failing.locator("summary").click()
    expect(failing.locator("pre")).to_contain_text('"error": "Jira did not answer in time"')
    assert page.evaluate("typeof window.__xss") == "undefined"


def test_delete_a_session_through_the_confirmation(page: Page) -> None:
    log_in(page)
    page.get_by_role("link", name="D0456").click()

    page.get_by_role("link", name="Delete…").click()
    expect(page.get_by_role("heading", name="Delete session D0456?")).to_be_visible()
    expect(page.get_by_text("2 messages and 1 turns")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    expect(page.get_by_role("heading", name="Session D0456")).to_be_visible()

    page.get_by_role("link", name="Delete…").click()
    page.get_by_role("button", name="Delete for good").click()

    expect(page.get_by_role("status")).to_contain_text("D0456 was deleted")
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("tbody")).not_to_contain_text("D0456")
    page.goto("/admin/sessions/D0456")
    expect(page.get_by_role("alert")).to_contain_text("No stored session")
