"""The goal: hashed at load, asserted intact; and the honest limits of the hash."""

from pathlib import Path

import pytest

from overnight.core.errors import ConfigError, GoalMutated
from overnight.core.goal import Goal, goal_digest

TEXT = "Reduce p95 latency on /api/search to under 200ms."


def test_clean_goal_is_intact() -> None:
    g = Goal(TEXT)
    g.assert_intact()
    g.assert_intact(goal_digest(TEXT))
    assert g.text == TEXT


def test_in_process_poke_at_the_text_alone_is_caught() -> None:
    g = Goal(TEXT)
    object.__setattr__(g, "_text", "Improve observability of the search subsystem.")
    with pytest.raises(GoalMutated, match="mutated"):
        g.assert_intact()


def test_limit_a_mutator_that_also_rewrites_the_hash_passes() -> None:
    # The check is self-referential: anything that can set the text can set the digest.
    g = Goal(TEXT)
    worse = Goal(TEXT)
    new = "Improve observability of the search subsystem."
    object.__setattr__(worse, "_text", new)
    object.__setattr__(worse, "_sha", goal_digest(new))
    worse.assert_intact()
    assert worse.text != g.text
    # ...which is why the harness also compares against the digest recorded at creation.
    with pytest.raises(GoalMutated, match="created with"):
        worse.assert_intact(g.sha256)


def test_a_goal_file_edited_on_disk_changes_nothing(tmp_path: Path) -> None:
    g = Goal(TEXT)
    p = tmp_path / "goal.txt"
    p.write_text("Improve observability of the search subsystem.")
    g.assert_intact()
    assert p.read_text() != g.text


def test_empty_goal_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError) as info:
        Goal("   ")
    assert info.value.field == "goal"


def test_goal_has_no_setter() -> None:
    g = Goal(TEXT)
    with pytest.raises(AttributeError):
        g.text = "something else"  # type: ignore[misc]
