"""Episodic lessons: one line each, specific and falsifiable, or not kept at all.

A lesson is offered by the agent in its final answer as a line starting ``LESSON:``. It is
kept only if it names something concrete (a path, an identifier, a command, a number) and is
not a generic caution: a vague lesson costs tokens on every later call and changes nothing.
"""

from __future__ import annotations

import re

MAX_LESSON_CHARS = 240
_CONCRETE = re.compile(r"[/\\]|\w+\.\w+|\w+_\w+|\w+\(|`[^`]+`|\d|--?\w+|[A-Z][a-z]+[A-Z]\w*")
_VAGUE = re.compile(
    r"^(be|always be|stay|remember to be|try to be)\s+(careful|mindful|cautious|thorough)\b",
    re.IGNORECASE,
)


def extract_lessons(text: str) -> list[str]:
    """Lines of the form ``LESSON: ...`` that pass ``is_specific``."""
    found: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.upper().startswith("LESSON:"):
            continue
        lesson = stripped[len("LESSON:") :].strip()
        if is_specific(lesson):
            found.append(lesson)
    return found


def is_specific(lesson: str) -> bool:
    if not lesson or len(lesson) > MAX_LESSON_CHARS or "\n" in lesson:
        return False
    if _VAGUE.search(lesson):
        return False
    return _CONCRETE.search(lesson) is not None


def render_lessons(lessons: list[str]) -> str:
    if not lessons:
        return ""
    lines = "\n".join(f"- {item}" for item in lessons)
    return f"Lessons from earlier tasks in this run (specific; trust them):\n{lines}"
