"""Every relative link of README.md and docs/*.md leads somewhere: the file exists, and the anchor is a
heading of it (as GitHub names headings' anchors). Links inside code are not links; web addresses are not
checked."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tests.support.doc_commands import DOCUMENTS, REPOSITORY

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^()\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")


def prose(text: str) -> list[str]:
    """The document's lines outside fenced blocks, inline code removed."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a document; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: Counter[str] = Counter()
    found: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        heading = re.match(r"#{1,6} (.*)", line)
        if fenced or not heading:
            continue
        base = slug(heading.group(1).replace("`", ""))
        found.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def broken_links(document: Path, root: Path = REPOSITORY) -> list[str]:
    broken: list[str] = []
    for line in prose(document.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # a web address, not ours to check
            file_part, _, anchor = target.partition("#")
            linked = (document.parent / file_part).resolve() if file_part else document
            name = f"{document.relative_to(root)}: ({target})"
            if not linked.exists():
                broken.append(f"{name}: no such file")
            elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
                broken.append(f"{name}: no heading with that anchor in {linked.name}")
    return broken


def test_the_slugs_are_github_s() -> None:
    # Given headings with code, punctuation and repeats, Then their anchors are the ones GitHub gives them
    assert (
        slug("One customer-managed key (-c kms_key=customer)")
        == "one-customer-managed-key--c-kms_keycustomer"
    )
    assert slug("Outbox row (DynamoDB attributes)") == "outbox-row-dynamodb-attributes"
    assert slug("outbox local up: a local AWS for your own services") == (
        "outbox-local-up-a-local-aws-for-your-own-services"
    )


def test_every_relative_link_and_anchor_of_the_docs_resolves() -> None:
    # Given README.md and every document of docs/
    assert len(DOCUMENTS) > 10

    # Then each of their links to each other (and to the repository's files) resolves, anchor included
    broken = [problem for document in DOCUMENTS for problem in broken_links(document)]
    assert not broken, "\n".join(broken)


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    # Given a document whose links miss a file and an anchor, beside one that has the anchor
    (tmp_path / "other.md").write_text("# Title\n\n## A `code` heading\n")
    document = tmp_path / "doc.md"
    document.write_text(
        "[ok](other.md#a-code-heading) [gone](missing.md) [bad](other.md#nowhere) `[code](x.md)`\n"
        "```text\n[in a block](y.md)\n```\n"
    )

    # Then exactly the two broken ones are reported
    problems = broken_links(document, root=tmp_path)
    assert len(problems) == 2
    assert "missing.md" in problems[0]
    assert "nowhere" in problems[1]
