"""Park reasons: the first sentence names the path and the rule."""

from __future__ import annotations

from overnight.core.candidate_rules import nested_repository, park_reason, too_large
from overnight.core.protect import ChangedPath, build_protection


def test_a_protection_reason_names_the_path_and_the_rule_first() -> None:
    p = build_protection(None, [], {"calc.py"}, set(), {"pytest"})
    forged = p.violations([ChangedPath("A", "pkg/x.pth"), ChangedPath("M", "tests/test_a.py")])
    reason, lines = park_reason([], forged)
    assert reason.startswith("changed what judges it: `pkg/x.pth` is import machinery (created): ")
    assert reason.endswith("(and 1 more)")
    assert lines == forged


def test_refusals_come_first_and_a_limit_is_not_called_a_judged_change() -> None:
    big = too_large("data/big.bin", 3 << 20, 1 << 20)
    reason, _ = park_reason([big], [])
    assert reason.startswith("`data/big.bin` is 3.0 MiB, above [run] max_file_mb (1 MiB)")
    nested = nested_repository("vendor/lib", "vendor/lib/.git")
    reason, lines = park_reason([big, nested], [])
    assert reason.startswith("changed what judges it: `vendor/lib` is a nested git repository")
    assert len(lines) == 2
