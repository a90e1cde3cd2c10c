"""Collecting a spec's problems, so that a person sees every one of them at once, each with
its field and fix, rather than one per try."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from overnight.core.errors import ConfigError, SpecProblems


class Problems:
    """The problems found so far; ``raise_found`` raises them: one as itself, several as
    ``SpecProblems``."""

    def __init__(self) -> None:
        self.found: list[ConfigError] = []

    def add(self, problem: ConfigError) -> None:
        if isinstance(problem, SpecProblems):
            self.found += problem.problems
        else:
            self.found.append(problem)

    @contextmanager
    def checking(self) -> Iterator[None]:
        """A check whose ``ConfigError`` is kept instead of raised."""
        try:
            yield
        except ConfigError as exc:
            self.add(exc)

    def raise_found(self) -> None:
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise SpecProblems(list(self.found))
