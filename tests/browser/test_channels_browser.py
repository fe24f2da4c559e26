"""A channel's settings edited in a real browser (Debian's Chromium through Playwright)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.browser.test_admin_browser import CHROMIUM, log_in
from tests.web.test_admin_channels import serve_channels

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Chromium is not at /usr/bin/chromium"),
]


@pytest.fixture
def page(sqlite_url: str) -> Iterator[Page]:
    with serve_channels(sqlite_url) as site, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser.new_context(base_url=site.url).new_page()
        browser.close()


def test_an_admin_edits_a_channels_setting(page: Page) -> None:
    log_in(page)
    page.get_by_role("link", name="Channels").click()
    page.get_by_label("Channel ID").fill("C0SUP")
    page.get_by_role("button", name="Open").click()

    page.get_by_label("instructions").fill("Answer in Portuguese")
    page.get_by_label("answer_all").select_option("on")
    page.get_by_label("jira_project").fill("nope")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("jira_project 'nope' is not allowed")

    page.get_by_label("jira_project").fill("sup")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    expect(page.get_by_label("jira_project")).to_have_value("SUP")
    changes = page.locator("table.changes tbody tr")
    expect(changes).to_have_count(3)
    expect(changes.first).to_contain_text("admin")

    page.get_by_role("banner").get_by_role("link", name="Channels").click()
    expect(page.locator("table.channels tbody tr")).to_contain_text("Answer in Portuguese")
