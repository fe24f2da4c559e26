"""The README and docs/ hold together: every relative link leads to a file of the repository
(and to a heading of it, when it names one), no file cites a document the repository does
not hold, and every setting of .env.example is documented with its default."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

#: documents that exist only outside the repository: citing them leaves a reader stranded
#: (spelled in pieces, so that this file does not cite them either)
MISSING = [name.upper() + ".md" for name in ("interface", "architecture", "reliability")]
MISSING.append("/".join(("..", "shared")))  # joined at run time: no constant to fold

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SETTING = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*([^|]*?)\s*\|", re.MULTILINE)


def prose(text: str) -> str:
    """Markdown without its code: links and headings inside code are not links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    return _LINK.findall(prose(text))


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings: lower case, punctuation dropped, spaces as
    hyphens, and a repeated one numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def dead_links(document: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``document`` that lead nowhere inside ``root``."""
    dead = []
    for target in links(document.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        if not resolved.is_relative_to(root.resolve()) or not resolved.exists():
            dead.append(target)
        elif anchor and resolved.suffix == ".md":
            if anchor not in anchors(resolved.read_text(encoding="utf-8")):
                dead.append(target)
    return dead


def repository_files() -> list[Path]:
    """The files git would commit: tracked, or new and not ignored (every file but the
    caches and the virtual environment where there is no git checkout)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return _walked(ROOT)
    return [ROOT / name for name in listed.decode().split("\0") if name]


def _walked(root: Path) -> list[Path]:
    skip = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache"}
    files = []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip]
        files += [Path(top) / name for name in names]
    return files


@pytest.mark.parametrize("document", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_of_the_repository(document: Path) -> None:
    assert dead_links(document) == []


def test_no_file_cites_a_document_the_repository_does_not_hold() -> None:
    citing = []
    for path in repository_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):  # binary, or gone since it was listed
            continue
        citing += [f"{path.relative_to(ROOT)}: {name}" for name in MISSING if name in text]
    assert citing == []


@pytest.mark.parametrize("name", ["settings.md", "interface.md"])
def test_every_setting_is_documented_with_its_default(name: str) -> None:
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    example = (ROOT / ".env.example").read_text(encoding="utf-8")
    rows = dict(_TABLE_ROW.findall(text))
    for setting, value in _SETTING.findall(example):
        assert f"`{setting}`" in text, f"{setting} is not in docs/{name}"
        if value and setting in rows:
            assert rows[setting] == f"`{value}`", f"{setting}'s default in docs/{name}"


def test_a_dead_link_an_anchor_and_code_are_told_apart(tmp_path: Path) -> None:
    assert anchors("# A b\n## A, b!\n```\n# not\n```\n### `bot run` --http\n") == {
        "a-b",
        "a-b-1",
        "bot-run---http",
    }
    text = "[a](gone.md) `[b](code.md)` [c](https://x.y/z) [d](#here)\n```\n[e](f.md)\n```"
    assert links(text) == ["gone.md", "https://x.y/z", "#here"]
    docs = tmp_path / "repo" / "docs"
    docs.mkdir(parents=True)
    (docs / "there.md").write_text("# There\n## Its part\n")
    page = docs / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#its-part) [ok](#a-heading) [x](nope.md)\n"
        "[y](there.md#no-such-part) [z](../../outside.md) [w](#nowhere)\n# A heading\n"
    )
    (tmp_path / "outside.md").write_text("# Outside\n")
    dead = dead_links(page, tmp_path / "repo")
    assert dead == ["nope.md", "there.md#no-such-part", "../../outside.md", "#nowhere"]
