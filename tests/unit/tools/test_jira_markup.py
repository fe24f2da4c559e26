"""The model's Markdown as Jira takes it: ADF that Jira's checks accept (the fake's, written
from Atlassian's reference), and wiki markup in which the model's text is never markup."""

from __future__ import annotations

import pytest

from bot.tools.jira.markup import plain_text, to_adf, to_wiki
from tests.fakes.jira_adf import problem

MARKDOWN = """# Export fails

The **CSV** export _fails_ for `acme` since ~~Monday~~ [the deploy](https://example.com/d).
Second line.

- one
- two
  1. nested
  2. list

> quoted *text*

```python
print("hi")
```

| a | b |
|---|---|
| 1 | 2 |

---
![logo](https://example.com/l.png) and [a script](javascript:alert(1))
"""


def test_markdown_becomes_a_document_jira_accepts() -> None:
    document = to_adf(MARKDOWN)
    assert problem(document) is None
    heading, paragraph = document["content"][:2]
    assert heading == {
        "type": "heading",
        "attrs": {"level": 1},
        "content": [{"type": "text", "text": "Export fails"}],
    }
    texts = paragraph["content"]
    assert {"type": "text", "text": "CSV", "marks": [{"type": "strong"}]} in texts
    assert {"type": "text", "text": "acme", "marks": [{"type": "code"}]} in texts
    assert {"type": "hardBreak"} in texts  # the model's line break stays one
    link = {"type": "link", "attrs": {"href": "https://example.com/d"}}
    assert {"type": "text", "text": "the deploy", "marks": [link]} in texts
    kinds = [block["type"] for block in document["content"]]
    assert kinds == [
        "heading",
        "paragraph",
        "bulletList",
        "blockquote",
        "codeBlock",
        "table",
        "rule",
        "paragraph",
    ]
    assert "javascript" not in str(document["content"][-1].get("content", [{}])[-1].get("marks"))
    assert "Export fails\nThe CSV export fails" in plain_text(document)


@pytest.mark.parametrize("text", ["", "   ", "plain", "a\n\n\nb", "* * *", "[]()", "`", "> "])
def test_any_text_is_a_valid_document(text: str) -> None:
    assert problem(to_adf(text)) is None


def test_markdown_becomes_wiki_markup_with_the_text_escaped() -> None:
    wiki = to_wiki(MARKDOWN)
    assert wiki.startswith("h1. Export fails\n\nThe *CSV* export _fails_ for {{acme}} since")
    assert "-Monday- [the deploy|https://example.com/d].\nSecond line." in wiki
    assert "* one\n* two\n*# nested\n*# list" in wiki
    assert "{quote}\nquoted _text_\n{quote}" in wiki
    assert '{code:python}\nprint("hi")\n{code}' in wiki
    assert "||a||b||\n|1|2|" in wiki
    assert "[a script](javascript:alert(1))" not in wiki
    # what would be markup in Jira is the model's text, escaped
    assert to_wiki("a {color:red}x{color} [link|http://x] |cell| *not bold") == (
        "a \\{color:red\\}x\\{color\\} \\[link\\|http://x\\] \\|cell\\| \\*not bold"
    )
    assert to_wiki("well-known a_b") == "well-known a_b"
