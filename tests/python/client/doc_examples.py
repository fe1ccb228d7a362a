"""The fenced code blocks of a Markdown document, and psql's output without
what varies from run to run, for the tests that run the docs' examples as
printed (test_readme.py, test_proxy_readme.py).

CommonMark's fences: a line of three or more backticks, indented by at most
three spaces beyond its list item, opens a block whose info string's first
word is its language; a line of at least as many backticks closes it. The
block's lines lose the fence's indentation (blocks inside list items are
indented with the item).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# the psql the examples are run with (a client: any 15 will do)
PSQL = Path("/usr/lib/postgresql/15/bin/psql")
FENCE = re.compile(r"^( *)(`{3,})\s*(\S*)")
HEADING = re.compile(r"^(#{1,6}) +(.*?) *#*$")


@dataclass
class Block:
    lang: str  # the info string's first word ('' when none)
    text: str  # the lines between the fences, without the fence's indentation
    line: int  # the opening fence's line (1-based), for messages
    heading: str  # the nearest heading above it, without its #s


def blocks(path: Path) -> list[Block]:
    """Every fenced block of the document, in order."""
    out: list[Block] = []
    heading = ""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            h = HEADING.match(lines[i])
            if h:
                heading = h.group(2)
            i += 1
            continue
        indent, ticks, lang = len(m.group(1)), m.group(2), m.group(3)
        start = i
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^ *{ticks}`*\s*$", lines[i]):
            line = lines[i]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            i += 1
        if i == len(lines):
            raise ValueError(f"{path}:{start + 1}: a code block that is never closed")
        out.append(Block(lang, "\n".join(body) + "\n", start + 1, heading))
        i += 1
    return out


def section_blocks(path: Path, heading: str, lang: str | None = None) -> list[Block]:
    """The blocks under the heading (its text without the #s), in order,
    optionally only those of one language; an error if there is no such
    heading or no such block (a renamed section must fail the test that
    runs it, not skip it)."""
    found = [b for b in blocks(path) if b.heading == heading and (lang is None or b.lang == lang)]
    if not found:
        raise LookupError(f"{path.name} has no {lang or ''} code block under the heading "
                          f"{heading!r}")
    return found


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")]


def normalized(lines: list[str]) -> list[str]:
    """psql's output without the timings (a NOTICE's seconds=, a result's
    seconds column) and without its column padding."""
    out = []
    seconds = None
    for line in lines:
        line = re.sub(r"seconds=[0-9.]+", "seconds=...", line.rstrip())
        if re.fullmatch(r"[-+]+", line.strip()):
            continue  # the rule under a header: its width follows the values
        if " | " in line or line.endswith(" |") or re.match(r"^ *\S+ *\|", line):
            cells = _cells(line)
            if "seconds" in cells:
                seconds = cells.index("seconds")
            elif seconds is not None and seconds < len(cells):
                cells[seconds] = "..."
            line = " | ".join(cells)
        out.append(line.strip())
    while out and not out[-1]:
        out.pop()
    return out
