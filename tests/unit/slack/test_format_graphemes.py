"""Splitting never cuts a user-perceived character (a grapheme cluster) in two."""

from __future__ import annotations

import random

import pytest

from bot.slack.format import format_answer, split_message

CLUSTERS = {
    "family, ZWJ": "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",
    "technologist, skin tone and ZWJ": "\U0001f469\U0001f3fd\u200d\U0001f4bb",
    "rainbow flag, VS16 and ZWJ": "\U0001f3f3\ufe0f\u200d\U0001f308",
    "flag": "\U0001f1eb\U0001f1f7",
    "subdivision flag, tags": "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074"
    "\U000e007f",
    "keycap": "1\ufe0f\u20e3",
    "combining marks": "e\u0301\u0323",
    "Hangul jamo": "\u1100\u1161\u11a8",
    "Devanagari conjunct": "\u0915\u094d\u0937\u093f",
}


def cuts(text: str, chunks: list[str]) -> list[int]:
    """Where each chunk starts and ends in `text` (chunks are pieces of it, in order)."""
    found, pos = [], 0
    for chunk in chunks:
        start = text.index(chunk, pos)
        assert text[pos:start].strip() == "", f"lost text: {text[pos:start]!r}"
        pos = start + len(chunk)
        found += [start, pos]
    assert text[pos:].strip() == ""
    return found


@pytest.mark.parametrize("cluster", CLUSTERS.values(), ids=CLUSTERS.keys())
def test_a_cluster_at_the_limit_moves_whole_to_the_next_message(cluster: str) -> None:
    limit = 40
    for shift in range(len(cluster) + 1):
        before = "x" * (limit - shift)
        text = before + cluster + "y" * 60
        chunks = split_message(text, limit=limit)
        assert all(len(c) <= limit for c in chunks)
        assert "".join(chunks) == text
        inside = set(range(len(before) + 1, len(before) + len(cluster)))
        assert not inside & set(cuts(text, chunks)), (shift, chunks)
        assert any(cluster in c for c in chunks), (shift, chunks)


@pytest.mark.parametrize("cluster", CLUSTERS.values(), ids=CLUSTERS.keys())
def test_a_run_of_clusters_splits_between_them(cluster: str) -> None:
    text = cluster * 120
    for limit in (32, 33, 35, 38, 41, 100):
        chunks = split_message(text, limit=limit)
        assert "".join(chunks) == text
        assert all(c == cluster * (len(c) // len(cluster)) for c in chunks), (limit, chunks)


def test_flags_pair_up_from_the_start_of_the_run() -> None:
    # Regional indicators pair in order: cutting after an odd number of them makes other flags.
    flags = ["\U0001f1eb\U0001f1f7", "\U0001f1e9\U0001f1ea", "\U0001f1ef\U0001f1f5"]
    for lead in range(4):
        text = "x" * lead + "".join(flags) * 30
        allowed = {lead + 2 * i for i in range(len(text))} | set(range(lead + 1))
        for limit in (32, 33, 47):
            chunks = split_message(text, limit=limit)
            assert "".join(chunks) == text
            assert set(cuts(text, chunks)) <= allowed, (lead, limit)


@pytest.mark.parametrize("seed", range(20))
def test_random_answers_are_cut_between_clusters(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [*CLUSTERS.values(), "a", "b", "\u4e2d", " ", "\n"]
    parts = [rng.choice(pieces) for _ in range(rng.randint(200, 1500))]
    text = "".join(parts)
    allowed, pos = {0}, 0
    for part in parts:
        pos += len(part)
        allowed.add(pos)
    limit = rng.randint(32, 300)
    chunks = split_message(text, limit=limit)
    assert all(0 < len(c) <= limit for c in chunks)
    assert set(cuts(text, chunks)) <= allowed


def test_a_long_code_line_of_emoji_is_cut_between_them() -> None:
    family = CLUSTERS["family, ZWJ"]
    chunks = format_answer(f"```\n{family * 1200}\n```")
    assert len(chunks) > 1
    for chunk in chunks:
        inner = chunk.removeprefix("```\n").removesuffix("\n```")
        assert inner == family * (len(inner) // len(family)), chunk[:40]


def test_one_cluster_longer_than_a_message_is_cut_at_the_limit() -> None:
    # Nothing can keep it whole; it still goes out in as few messages as fit.
    text = "e" + "\u0301" * 100
    chunks = split_message(text, limit=32)
    assert [len(c) for c in chunks] == [32, 32, 32, 5]
    assert "".join(chunks) == text
