"""Every relative link in README.md and docs/**/*.md reaches a file that exists, and every
#anchor a heading there (GitHub's heading ids); every repository path the docs quote in
backticks (headmovies/..., docs/..., tests/..., bench/...) exists. Generated folders (data/,
outputs/) are not checked: they hold nothing until a command runs. docs/extending.md's quoted
paths are not checked either: they name the files a new experiment would add."""

from __future__ import annotations

import os
import re
from pathlib import Path

import headmovies

ROOT = Path(headmovies.__file__).resolve().parents[1]  # the repository
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)\)|<img [^>]*src=\"([^\"]+)\"")
CODE_PATH = re.compile(r"`((?:headmovies|docs|tests|bench)/[^`\s]*)`")
NEW_FILES_PAGES = {"docs/extending.md"}  # quoted paths there are files to create
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def prose(text: str) -> str:
    """The page without fenced code blocks (their brackets are code, not links)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's id for a heading: markup and punctuation dropped, lower case, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The ids of a page's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            s = slug(m.group(1))
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return out


def broken_links(pages: list[Path] = PAGES) -> list[str]:
    """'page: target (why)' for each relative link or quoted path that leads nowhere."""
    bad = []
    for page in pages:
        name = os.path.relpath(page, ROOT)
        text = prose(page.read_text(encoding="utf-8"))
        for _, target, src in LINK.findall(text):
            target = target or src
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f"{name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{name}: {target} (no heading #{anchor})")
        for path in [] if name in NEW_FILES_PAGES else CODE_PATH.findall(text):
            if any(c in path for c in "*{}<>$…"):
                continue  # a pattern, not one path
            if not (ROOT / path.rstrip(".,;:")).exists():
                bad.append(f"{name}: `{path}` (no such path)")
    return bad


def test_slugs_follow_github():
    assert slug("Forks (`--fork-from`)") == "forks---fork-from"
    assert slug("Census: how often orbits form, ω = 12") == "census-how-often-orbits-form-ω--12"
    assert slug("Faults: full disks, concurrent writers, kills") == "faults-full-disks-concurrent-writers-kills"


def test_the_checker_finds_a_broken_link_anchor_and_path(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## Part two\n\n## Part two\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#part-two) [again](a.md#part-two-1) [gone](c.md) [bad anchor](a.md#part-three)\n"
        "[web](https://x.org/y) [self](#nowhere) `headmovies/cli.py` `headmovies/nope.py`\n"
        '<img width="9" src="gone.gif" alt="x">\n'
        "```\n[in code](nowhere.md) `headmovies/in_code.py`\n```\n",
        encoding="utf-8",
    )
    assert [b.split(": ", 1)[1] for b in broken_links([page])] == [
        "c.md (no such file)",
        "a.md#part-three (no heading #part-three)",
        "#nowhere (no heading #nowhere)",
        "gone.gif (no such file)",
        "`headmovies/nope.py` (no such path)",
    ]


def test_every_link_and_path_in_the_docs_exists():
    assert len(PAGES) > 10
    assert broken_links() == []
