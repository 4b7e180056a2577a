"""What the static checks may be told to skip: in the five packages every ``type: ignore``
names its error code and every ``noqa`` its rule, each with the reason on the same line,
so a reader sees why the checker is overruled there and a wider silence cannot creep in."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("schemas", "engine", "nodes", "workers", "api")

#: a marker that silences a checker: mypy's or pyright's ignore, or ruff's noqa
MARKER = re.compile(r"#\s*(type:\s*ignore|pyright:\s*ignore|noqa)\b(.*)$")
#: an ignore with its codes, then a reason: ``# type: ignore[arg-type]  # why``
IGNORE_WITH_REASON = re.compile(r"^\[[a-z-]+(, *[a-z-]+)*\]\s+#\s*\S")
#: a noqa with its rules, then a reason: ``
NOQA_WITH_REASON = re.compile(r"^:\s*[A-Z]+[0-9]+(, *[A-Z]+[0-9]+)*\s+\S")


def markers_without_reason(text: str) -> list[tuple[int, str]]:
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        marker = MARKER.search(line)
        if marker is None:
            continue
        kind, rest = marker.group(1), marker.group(2)
        pattern = NOQA_WITH_REASON if kind == "noqa" else IGNORE_WITH_REASON
        if not pattern.match(rest):
            found.append((lineno, line.strip()))
    return found


def test_the_check_tells_a_marker_with_its_reason_from_a_bare_one():
    text = "\n".join(
        [
            "x = f()  # type: ignore[arg-type]  # the library's stub is wrong",
            "y = g()  # noqa: B027 - a no-op default",
            "z = h()  # noqa: F401  (re-exported)",
            "a = f()  # type: ignore",
            "b = f()  # type: ignore[arg-type]",
            "c = f()  # noqa",
            "d = f()  # noqa: E731",
            "e = f()  # pyright: ignore",
        ]
    )
    assert [lineno for lineno, _ in markers_without_reason(text)] == [4, 5, 6, 7, 8]


def test_every_marker_in_the_packages_names_its_code_and_says_why():
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for lineno, line in markers_without_reason(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line}")
    assert not offenders, "\n".join(offenders)
