"""The goal: loaded once, held by the harness, hashed at load.

No tool, task or workspace file can reach it: it lives in this object and in the run directory,
never in the worktree. The hash is a smoke alarm behind that lock, not the lock itself: it
catches an in-process write that forgets to update the digest, and nothing that sets both.
"""

from __future__ import annotations

import hashlib

from overnight.core.errors import ConfigError, GoalMutated


def goal_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Goal:
    """The original goal. There is no setter."""

    __slots__ = ("_sha", "_text")

    def __init__(self, text: str) -> None:
        if not text or not text.strip():
            raise ConfigError("goal", "the goal is empty", 'write it as goal = "..." in the spec')
        self._text = text
        self._sha = goal_digest(text)

    @property
    def text(self) -> str:
        return self._text

    @property
    def sha256(self) -> str:
        return self._sha

    def assert_intact(self, expected_sha: str | None = None) -> None:
        """Raise ``GoalMutated`` if the text no longer hashes to the digest taken at load, or
        to ``expected_sha`` (the digest recorded when the run was created)."""
        actual = goal_digest(self._text)
        if actual != self._sha:
            raise GoalMutated("goal text mutated: it no longer matches its load-time hash")
        if expected_sha is not None and actual != expected_sha:
            raise GoalMutated("goal text differs from the one this run was created with")
