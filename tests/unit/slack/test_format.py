"""bot.slack.format: Markdown -> safe Slack mrkdwn, and splitting into postable chunks."""

from __future__ import annotations

import random
import re

import pytest

from bot.slack.format import (
    DEFAULT_LIMIT,
    ZWJ,
    ZWSP,
    escape,
    format_answer,
    split_message,
    to_mrkdwn,
)

FENCE = "```"


# --------------------------------------------------------------------------------------------
# Conversion rules


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        # emphasis
        ("**bold**", "*bold*"),
        ("__bold__", "*bold*"),
        ("*italic*", "_italic_"),
        ("_italic_", "_italic_"),
        ("~~strike~~", "~strike~"),
        ("***both***", "_*both*_"),
        ("**bold _and italic_**", "*bold _and italic_*"),
        ("a **b** c", "a *b* c"),
        ("**bold\nacross lines**", "*bold*\n*across lines*"),
        # headings
        ("# Heading", "*Heading*"),
        ("### Small heading", "*Small heading*"),
        ("# Heading with **bold**", "*Heading with bold*"),
        ("Setext\n======", "*Setext*"),
        # paragraphs and breaks
        ("one\n\ntwo", "one\n\ntwo"),
        ("one\ntwo", "one\ntwo"),
        # links
        ("[text](https://example.com)", "<https://example.com|text>"),
        ("[text](http://example.com/a?b=1&c=2)", "<http://example.com/a?b=1&amp;c=2|text>"),
        ("[mail me](mailto:a@example.com)", "<mailto:a@example.com|mail me>"),
        ("[a|b<c>d](https://example.com)", "<https://example.com|abcd>"),
        ("[Tom & Jerry](https://example.com)", "<https://example.com|Tom &amp; Jerry>"),
        ("[**bold** link](https://example.com)", "<https://example.com|bold link>"),
        ("[](https://example.com)", "<https://example.com>"),
        ("[docs](https://docs.python.org/3/)", "<https://docs.python.org/3/|docs>"),
        ("[python.org](https://docs.python.org/3/)", "<https://docs.python.org/3/|python.org>"),
        ("[www.example.com](https://example.com)", "<https://example.com|www.example.com>"),
        (
            "[https://example.com/x](https://example.com/y)",
            "<https://example.com/y|https://example.com/x>",
        ),
        ("[a@example.com](mailto:a@example.com)", "<mailto:a@example.com|a@example.com>"),
        ("![alt text](https://example.com/i.png)", "<https://example.com/i.png|alt text>"),
        # links we do not make: keep the words only
        ("[click](javascript:alert(1))", "[click](javascript:alert(1))"),  # not a link at all
        ("[click](/relative/path)", "click"),
        ("[click](ftp://example.com/f)", "click"),
        # bare URLs stay (escaped); Slack links them itself
        ("see https://example.com/a?b=1&c=2", "see https://example.com/a?b=1&amp;c=2"),
        ("see <https://example.com>", "see &lt;https://example.com&gt;"),
        # lists
        ("- a\n- b", "\u2022 a\n\u2022 b"),
        ("* a\n+ b", "\u2022 a\n\n\u2022 b"),  # two lists
        ("1. a\n2. b", "1. a\n2. b"),
        ("3. a\n4. b", "3. a\n4. b"),
        ("1) a\n2) b", "1. a\n2. b"),
        ("- a\n  - b\n  - c\n- d", "\u2022 a\n    \u2022 b\n    \u2022 c\n\u2022 d"),
        ("- a\n  1. b", "\u2022 a\n    1. b"),
        ("- a\n\n- b", "\u2022 a\n\n\u2022 b"),
        ("- **bold** item", "\u2022 *bold* item"),
        ("- item\n  continued", "\u2022 item\n    continued"),
        # block quotes
        ("> quoted", "> quoted"),
        ("> line one\n> line two", "> line one\n> line two"),
        ("> **bold** quote", "> *bold* quote"),
        ("> a\n>\n> b", "> a\n> b"),
        ("> a\n>> nested", "> a\n> nested"),
        ("> a\n> > ```\n> > x\n> > ```", "> a\n> ```\n> x\n> ```"),
        # code
        ("use `x < y && z`", "use `x &lt; y &amp;&amp; z`"),
        ("`**not bold**`", "`**not bold**`"),
        ("```\ncode\n```", "```\ncode\n```"),
        ("```python\nif a < b:\n    pass\n```", "```\nif a &lt; b:\n    pass\n```"),
        ("    indented code", "```\nindented code\n```"),
        ("```\n**kept** [x](https://e.com)\n```", "```\n**kept** [x](https://e.com)\n```"),
        ("````\n```\n````", f"```\n``{ZWSP}`\n```"),
        ("- item\n\n  ```\n  code\n  ```", "\u2022 item\n\n```\ncode\n```"),
        # misc blocks
        ("a\n\n---\n\nb", "a\n\n" + "\u2500" * 10 + "\n\nb"),
        ("", ""),
        ("   \n\n  ", ""),
        ("plain text", "plain text"),
    ],
)
def test_to_mrkdwn(markdown: str, expected: str) -> None:
    assert to_mrkdwn(markdown) == expected


def test_table_becomes_an_aligned_code_block() -> None:
    markdown = "| name | qty |\n|------|----:|\n| apple & pear | 3 |\n| 苹果 | 12 |"
    assert to_mrkdwn(markdown) == (
        "```\n"
        "name         | qty\n"
        "-------------+----\n"
        "apple &amp; pear |   3\n"  # & counts as one column: it shows as one
        "苹果         |  12\n"  # CJK counts as two columns
        "```"
    )


def test_table_cells_are_plain_and_escaped() -> None:
    out = to_mrkdwn("| a |\n|---|\n| **<!channel>** [x](https://e.com) |")
    assert out == "```\na\n------------\n&lt;!channel&gt; x\n```"


# --------------------------------------------------------------------------------------------
# Safety


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("<!channel>", "&lt;!channel&gt;"),
        ("<!here> look", "&lt;!here&gt; look"),
        ("<!everyone>", "&lt;!everyone&gt;"),
        ("<!subteam^S123>", "&lt;!subteam^S123&gt;"),
        ("hi <@U123>", "hi &lt;@U123&gt;"),
        ("in <#C1>", "in &lt;#C1&gt;"),
        ("<#C1|general>", "&lt;#C1|general&gt;"),
        ("<https://evil|click>", "&lt;https://evil|click&gt;"),
        ("<https://evil.com|https://good.com>", "&lt;https://evil.com|https://good.com&gt;"),
        ("&lt;!channel&gt;", "&lt;!channel&gt;"),  # entities decode, then escape once
        ("a < b > c", "a &lt; b &gt; c"),
        ("**<!channel>**", "*&lt;!channel&gt;*"),
        ("# <!here>", "*&lt;!here&gt;*"),
        ("> <!channel>", "> &lt;!channel&gt;"),
        ("- <!channel>", "\u2022 &lt;!channel&gt;"),
        ("`<!channel>`", "`&lt;!channel&gt;`"),
        ("```\n<!channel>\n```", "```\n&lt;!channel&gt;\n```"),
        ("[<!channel>](https://example.com)", "<https://example.com|!channel>"),
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ],
)
def test_model_angle_brackets_are_inert(markdown: str, expected: str) -> None:
    assert to_mrkdwn(markdown) == expected


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("@channel", f"@{ZWJ}channel"),
        ("hey @here!", f"hey @{ZWJ}here!"),
        ("@everyone look", f"@{ZWJ}everyone look"),
        ("@Channel @HERE", f"@{ZWJ}Channel @{ZWJ}HERE"),
        ("**@here**", f"*@{ZWJ}here*"),
        ("[@channel](https://example.com)", f"<https://example.com|@{ZWJ}channel>"),
        ("mail ops@here.com", "mail ops@here.com"),  # an address, not a broadcast
        ("word@channel", f"word@{ZWJ}channel"),
        ("&gt;@here.", f"&gt;@{ZWJ}here."),
        ("`@here` in code is verbatim", "`@here` in code is verbatim"),
        ("@channels and @hereby", "@channels and @hereby"),  # other words
        ("@alice", "@alice"),
    ],
)
def test_broadcast_words_are_neutralised(markdown: str, expected: str) -> None:
    assert to_mrkdwn(markdown) == expected


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("[https://good.com](https://evil.com)", "https://good.com (https://evil.com)"),
        ("[good.com](https://evil.com/login)", "good.com (https://evil.com/login)"),
        ("[www.good.com](https://evil.com)", "www.good.com (https://evil.com)"),
        ("[Log in at good.com](https://evil.com)", "Log in at good.com (https://evil.com)"),
        ("[docs.python.org](https://python.org)", "docs.python.org (https://python.org)"),
        ("[see---good.com---now](https://evil.com)", "see---good.com---now (https://evil.com)"),
        ("[https://evil.com.good.com](https://good.com)", None),
        ("[good.com](https://good.com.evil.com)", "good.com (https://good.com.evil.com)"),
        ("[10.0.0.1](https://evil.com)", "10.0.0.1 (https://evil.com)"),
        ("[http://localhost](https://evil.com)", "http://localhost (https://evil.com)"),
        ("[boss@good.com](mailto:evil@evil.com)", "boss@good.com (mailto:evil@evil.com)"),
        ("[boss@good.com](https://evil.com)", "boss@good.com (https://evil.com)"),
        # a look-alike (Cyrillic "\u0430") is a different domain
        ("[p\u0430ypal.com](https://paypal.com)", "p\u0430ypal.com (https://paypal.com)"),
        # hidden direction overrides do not survive into link text
        ("[\u202egood.com](https://good.com)", "<https://good.com|good.com>"),
    ],
)
def test_links_cannot_be_disguised(markdown: str, expected: str | None) -> None:
    out = to_mrkdwn(markdown)
    if expected is None:  # the shown host is a different site than the target: no <url|text>
        assert "|" not in out
        assert not out.startswith("<")
    else:
        assert out == expected


def test_only_links_made_from_markdown_produce_angle_brackets() -> None:
    markdown = (
        "# Report <!channel>\n\n"
        "Hi <@U1>, see [the doc](https://example.com/doc?a=1&b=2) and <https://evil|x>.\n\n"
        "- <#C1> & @here\n"
        "> <!everyone>\n\n"
        "```\n<!here> & <@U2>\n```\n"
    )
    out = to_mrkdwn(markdown)
    assert re.findall(r"<[^>]*>", out) == ["<https://example.com/doc?a=1&amp;b=2|the doc>"]
    assert "@here" not in out
    assert "@everyone" not in out


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("a & b", "a &amp; b"),
        ("a &amp; b", "a &amp; b"),  # Markdown entity: means "&", escaped once
        ("AT&T", "AT&amp;T"),
        ("&&&", "&amp;&amp;&amp;"),
        ("`a &amp; b`", "`a &amp;amp; b`"),  # code is literal: shows "a &amp; b"
        ("&copy; 2024", "© 2024"),
        ("x &lt; y", "x &lt; y"),
    ],
)
def test_ampersands_are_escaped_exactly_once(markdown: str, expected: str) -> None:
    assert to_mrkdwn(markdown) == expected


def test_no_bare_ampersand_or_angle_bracket_survives() -> None:
    markdown = "a&b <c> &amp; &#60; &#x3e; [l&t](https://e.com/?q=1&r=<2>) `&<>` \n```\n&<>\n```"
    out = to_mrkdwn(markdown)
    links = re.findall(r"<[^<>]*>", out)
    assert links == ["<https://e.com/?q=1&amp;r=%3C2%3E|l&amp;t>"]
    rest = out.replace(links[0], "")
    assert "<" not in rest
    assert ">" not in rest
    assert re.findall(r"&(?!amp;|lt;|gt;)", out) == []


@pytest.mark.parametrize(
    "text",
    [
        "Emoji 😀👍🏽 👨‍👩‍👧 🇫🇷 and ❤️ stay",
        "中文\uff1a你好\uff0c世界\uff01日本語のテキスト、한국어",
        "Ünïcödé ß ø ñ — “quotes” … \u2018single\u2019",
    ],
)
def test_unicode_is_preserved(text: str) -> None:
    assert to_mrkdwn(text) == text
    assert to_mrkdwn(f"**{text}**") == f"*{text}*"
    assert format_answer(text) == [text]


def test_escape() -> None:
    assert escape("<a & b>") == "&lt;a &amp; b&gt;"
    assert escape("plain *text*") == "plain *text*"


# --------------------------------------------------------------------------------------------
# Splitting


def assert_pieces_of(text: str, chunks: list[str]) -> None:
    """Each chunk is the next piece of `text`; only whitespace lies between and around them."""
    pos = 0
    for chunk in chunks:
        found = text.find(chunk, pos)
        assert found >= 0, f"chunk not found in order: {chunk[:60]!r}"
        assert text[pos:found].strip() == "", f"lost text: {text[pos:found][:60]!r}"
        pos = found + len(chunk)
    assert text[pos:].strip() == ""


def test_short_text_is_one_chunk() -> None:
    assert split_message("hello") == ["hello"]
    assert split_message("x" * DEFAULT_LIMIT) == ["x" * DEFAULT_LIMIT]


@pytest.mark.parametrize("text", ["", " ", "\n\n\n", " \n \t "])
def test_no_empty_chunks(text: str) -> None:
    assert split_message(text) == []
    assert format_answer(text) == []


def test_prefers_paragraph_breaks() -> None:
    para = "word " * 100  # 500 chars
    text = "\n\n".join(para.strip() for _ in range(10))  # ~5000 chars
    lines_text = text.replace("\n\n", "\n")
    chunks = split_message(text, limit=1200)
    assert all(len(c) <= 1200 for c in chunks)
    assert all(c == para.strip() or "\n\n" in c for c in chunks)
    assert all(not c.endswith((" ", "\n")) and not c.startswith((" ", "\n")) for c in chunks)
    assert_pieces_of(text, chunks)
    # the same text without paragraph breaks is cut at line breaks
    chunks = split_message(lines_text, limit=1200)
    assert all(c.startswith("word") and c.endswith("word") for c in chunks)
    assert all(len(c.split("\n")) in (1, 2) for c in chunks)
    assert_pieces_of(lines_text, chunks)


def test_prefers_line_breaks_to_spaces() -> None:
    text = "\n".join("a b c d e f g h i" for _ in range(100))
    chunks = split_message(text, limit=100)
    assert all(c.startswith("a ") and c.endswith(" i") for c in chunks)
    assert_pieces_of(text, chunks)


def test_falls_back_to_spaces() -> None:
    text = " ".join(f"w{i:04d}" for i in range(1000))
    chunks = split_message(text, limit=200)
    assert all(len(c) <= 200 for c in chunks)
    assert all(re.fullmatch(r"w\d{4}( w\d{4})*", c) for c in chunks)
    assert " ".join(chunks) == text


def test_very_long_word_is_split_hard() -> None:
    text = "x" * 10_000
    chunks = split_message(text)
    assert [len(c) for c in chunks] == [3000, 3000, 3000, 1000]
    assert "".join(chunks) == text


def test_long_word_is_not_split_inside_an_entity() -> None:
    text = "a" * 98 + "&amp;" + "b" * 200
    chunks = split_message(text, limit=100)
    assert chunks[0] == "a" * 98
    assert chunks[1].startswith("&amp;")
    assert "".join(chunks) == text


def test_never_splits_inside_a_link() -> None:
    link = "<https://example.com/some/long/path|a link with many words in its text>"
    text = ("filler " * 12) + link + (" tail" * 40)
    for limit in range(len(link), 200, 3):
        chunks = split_message(text, limit=limit)
        assert all(len(c) <= limit for c in chunks)
        assert sum(link in c for c in chunks) == 1
        for c in chunks:
            assert c.count("<") == c.count(">")
        assert_pieces_of(text, chunks)


def test_a_link_longer_than_the_limit_is_still_split_within_the_limit() -> None:
    link = "<https://example.com/" + "p" * 300 + "|text>"
    chunks = split_message("before " + link + " after", limit=100)
    assert all(len(c) <= 100 for c in chunks)
    assert chunks[0] == "before"
    assert "".join(chunks[1:]).startswith(link)


def test_entities_never_split_at_any_limit() -> None:
    text = "&lt;&amp;&gt;" * 500
    for limit in (32, 33, 34, 35, 50, 99):
        chunks = split_message(text, limit=limit)
        assert "".join(chunks) == text
        for c in chunks:
            assert re.sub(r"&(amp|lt|gt);", "", c) == "", c


def test_grapheme_clusters_are_not_split() -> None:
    family = "👨‍👩‍👧"  # five code points
    for cluster in (family, "🇫🇷", "👍🏽", "e\u0301", "❤️"):
        text = cluster * 200
        for limit in (32, 33, 37, 41, 100):
            chunks = split_message(text, limit=limit)
            assert "".join(chunks) == text
            assert all(c == cluster * (len(c) // len(cluster)) for c in chunks), (cluster, limit)


def test_emoji_and_cjk_preserved_when_split() -> None:
    text = " ".join(["中文字符", "😀", "한국어", "🇯🇵", "ñandú"] * 2000)
    chunks = format_answer(text)
    assert all(len(c) <= DEFAULT_LIMIT for c in chunks)
    assert " ".join(chunks) == text


def test_45000_character_answer() -> None:
    rng = random.Random(42)
    words = ["alpha", "beta", "gamma", "&", "<tag>", "😀", "中文", "**bold**", "\n\n", "\n"]
    markdown = ""
    while len(markdown) < 45_000:
        markdown += rng.choice(words) + " "
    markdown = markdown[:45_000]
    chunks = format_answer(markdown)
    assert len(chunks) >= 12
    assert all(0 < len(c) <= 3000 for c in chunks)
    assert all(c.strip() for c in chunks)
    assert_pieces_of(to_mrkdwn(markdown), chunks)
    compact = "".join(to_mrkdwn(markdown).split())
    assert "".join("".join(chunks).split()) == compact


def test_plain_45000_characters_reassemble_exactly_at_spaces() -> None:
    text = " ".join(f"word{i}" for i in range(6000))[:45_000].strip()
    chunks = split_message(text)
    assert len(chunks) >= 15
    assert all(len(c) <= 3000 for c in chunks)
    assert " ".join(chunks) == text


def test_code_block_is_closed_and_reopened() -> None:
    code_lines = [f"line {i:03d} " + "x" * 40 for i in range(200)]
    text = "Intro\n\n```\n" + "\n".join(code_lines) + "\n```\n\nOutro"
    chunks = split_message(text, limit=1000)
    assert len(chunks) > 5
    assert all(len(c) <= 1000 for c in chunks)
    for c in chunks:
        assert c.count(FENCE) % 2 == 0, c  # every chunk has balanced fences
    assert chunks[0].startswith("Intro")
    assert chunks[-1].endswith("```\n\nOutro") or chunks[-1] == "Outro"
    # Removing the added fences gives back every code line, in order, whole.
    body = "\n".join(chunks)
    seen = [line for line in body.split("\n") if line.startswith("line ")]
    assert seen == code_lines
    for c in chunks[1:-1]:
        assert c.startswith("```\nline ")
        assert c.endswith("\n```")


def test_code_block_split_inside_one_long_line() -> None:
    text = "```\n" + "y" * 5000 + "\n```"
    chunks = split_message(text, limit=1000)
    assert all(len(c) <= 1000 for c in chunks)
    assert all(c.startswith("```\n") and c.endswith("\n```") for c in chunks)
    inner = "".join(c.removeprefix("```\n").removesuffix("\n```") for c in chunks)
    assert inner == "y" * 5000


def test_no_empty_code_block_at_a_boundary() -> None:
    # A cut right after the opening fence moves the whole block to the next chunk.
    text = "p" * 90 + "\n```\n" + "\n".join(["code"] * 30) + "\n```"
    chunks = split_message(text, limit=100)
    assert chunks[0] == "p" * 90
    assert all(c.strip(" `\n") for c in chunks)
    # A cut right before the closing fence does not open an empty block.
    text = "```\n" + "c" * 90 + "\n```\nafter"
    chunks = split_message(text, limit=100)
    assert chunks == ["```\n" + "c" * 90 + "\n```", "after"]


def test_split_code_from_markdown() -> None:
    code = "\n".join(f"print({i}) # a < b & c" for i in range(600))
    chunks = format_answer(f"Here:\n\n```python\n{code}\n```\n\nDone.")
    assert all(len(c) <= DEFAULT_LIMIT for c in chunks)
    assert all(c.count(FENCE) % 2 == 0 for c in chunks)
    printed = [line for c in chunks for line in c.split("\n") if line.startswith("print(")]
    assert printed == [f"print({i}) # a &lt; b &amp; c" for i in range(600)]
    assert chunks[-1].endswith("Done.")


@pytest.mark.parametrize("seed", range(25))
def test_random_texts_split_within_limit(seed: int) -> None:
    rng = random.Random(seed)
    pieces = ["word", "&amp;", "<https://e.com|a link>", "😀", "中", "```", "\n", "\n\n", " ", "x"]
    text = "".join(rng.choice(pieces) for _ in range(rng.randint(100, 3000)))
    limit = rng.randint(40, 400)
    chunks = split_message(text, limit=limit)
    assert all(0 < len(c) <= limit for c in chunks)
    assert all(c.strip() for c in chunks)
    # Apart from added fences and dropped whitespace, nothing is lost or reordered.
    joined = "".join(chunks).replace(FENCE, "")
    assert "".join(joined.split()) == "".join(text.replace(FENCE, "").split())


def test_limit_must_be_sensible() -> None:
    with pytest.raises(ValueError, match="limit"):
        split_message("text", limit=5)


_LINK = re.compile(r"<(?:https?://|mailto:)[^\s|<>]+(?:\|[^<>|]+)?>")


@pytest.mark.parametrize("seed", range(40))
def test_random_markdown_is_always_safe(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [
        "word", " ", "\n", "\n\n", "**", "__", "*", "_", "~~", "`", "```", "# ", "- ", "1. ",
        "> ", "|", "---", "[", "]", "(", ")", "https://a.com", "evil.com", "<", ">", "&", "!",
        "@here", "@channel", "<!everyone>", "<@U1>", "&amp;", "\\", "😀", "中",
    ]  # fmt: skip
    markdown = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 400)))
    out = to_mrkdwn(markdown)
    rest = _LINK.sub("", out)
    assert "<" not in rest
    assert ">" not in re.sub(r"(?m)^(?:\s*(?:• |\d+\. |>(?: |$)))+", "", rest)  # quote markers
    assert re.findall(r"&(?!amp;|lt;|gt;)", out) == []
    if "`" not in markdown and "    " not in markdown:  # code is verbatim by design
        assert re.search(r"@(here|channel|everyone)\b", out, re.IGNORECASE) is None
    chunks = split_message(out, limit=200)
    assert all(0 < len(c) <= 200 for c in chunks)
