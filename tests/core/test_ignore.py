"""The harness's gitignore matcher, checked against git's own answers on real files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from overnight.core.candidate_rules import BUILTIN_EXCLUDES, CandidateRules, rules_for
from overnight.core.ignore import (
    MAX_IGNORE_PATTERNS,
    IgnoreStack,
    PatternTooLarge,
    compile_glob,
    parse_rules,
)

RULES = """\
# a comment
*.log
!keep.log
/top-only.txt
build/
docs/**/*.md
**/gen/out
a/**/z
logs/**
[abc]x.py
[!d]y.py
q?.txt
\\#hash
trailing\\ x
deep/dir/file.txt
cache/
!cache/
*.tmp
!important.tmp
x[0-9][0-9].dat
"""

PATHS = [
    "app.log",
    "keep.log",
    "sub/app.log",
    "sub/keep.log",
    "top-only.txt",
    "sub/top-only.txt",
    "build/x.o",
    "pkg/build/y.o",
    "docs/a.md",
    "docs/x/y/a.md",
    "docs/a.txt",
    "gen/out",
    "p/q/gen/out",
    "a/z",
    "a/b/c/z",
    "ab/z",
    "logs/2024/x.txt",
    "ax.py",
    "dx.py",
    "ey.py",
    "dy.py",
    "q1.txt",
    "q12.txt",
    "#hash",
    "trailing x",
    "deep/dir/file.txt",
    "other/deep/dir/file.txt",
    "cache/c.bin",
    "t.tmp",
    "important.tmp",
    "x12.dat",
    "x1a.dat",
    "plain.py",
]


def git_ignored(root: Path, paths: list[str]) -> set[str]:
    done = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--stdin", "-z"],
        input="\0".join(paths).encode(),
        capture_output=True,
        check=False,
    )
    return {p for p in done.stdout.decode().split("\0") if p}


def ours(rules_text: str, path: str) -> bool:
    stack = IgnoreStack().push(parse_rules(rules_text.splitlines()))
    parts = path.split("/")
    # As the walk does: a directory that is ignored is not entered.
    for depth in range(1, len(parts)):
        if stack.ignored("/".join(parts[:depth]), True):
            return True
    return stack.ignored(path, False)


def test_the_matcher_agrees_with_git_on_every_path(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text(RULES)
    for rel in PATHS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    expected = git_ignored(tmp_path, PATHS)
    assert expected  # git ignores some of them, or the comparison says nothing
    found = {p for p in PATHS if ours(RULES, p)}
    assert found == expected


def test_a_deeper_ignore_file_overrides_a_shallower_one(tmp_path: Path) -> None:
    top = parse_rules(["*.dat"])
    deeper = parse_rules(["!keep.dat"], base="sub")
    stack = IgnoreStack().push(top).push(deeper)
    assert stack.ignored("x.dat", False)
    assert stack.ignored("sub/x.dat", False)
    assert not stack.ignored("sub/keep.dat", False)
    anchored = IgnoreStack().push(parse_rules(["/only"], base="sub"))
    assert anchored.ignored("sub/only", False) and not anchored.ignored("only", False)
    assert not anchored.ignored("sub/x/only", False)


@pytest.mark.parametrize(
    "pattern",
    ["*a*a*a*a*a*a*a*a*a*a*a*a*b", "**/**/**/**/**/**/**/**/b", "*" * 500 + "b", "[a]" * 300],
)
def test_a_pattern_built_to_backtrack_answers_in_one_pass(pattern: str) -> None:
    # Each of these takes exponential or high-polynomial time in a backtracking matcher.
    glob = compile_glob(pattern)
    assert not glob.matches("a" * 5000)
    assert not glob.matches("a/" * 2500)


def test_rule_files_beyond_the_limits_are_refused() -> None:
    with pytest.raises(PatternTooLarge):
        compile_glob("a" * 5000)
    stack = IgnoreStack()
    with pytest.raises(PatternTooLarge):
        stack.push(parse_rules([f"f{i}" for i in range(MAX_IGNORE_PATTERNS + 1)]))


@pytest.mark.parametrize(
    ("path", "is_dir"),
    [
        ("__pycache__", True),
        ("pkg/__pycache__", True),
        ("pkg/mod.pyc", False),
        (".pytest_cache", True),
        ("build", True),
        ("dist", True),
        ("src/pkg.egg-info", True),
        ("node_modules", True),
        (".coverage", False),
        (".coverage.host.123", False),
        ("pkg/_speedups.so", False),
    ],
)
def test_the_builtin_excludes_cover_the_usual_caches_and_build_products(
    path: str, is_dir: bool
) -> None:
    assert CandidateRules().generated(path, is_dir)


@pytest.mark.parametrize("path", ["pkg/build", "src/pip/operations/build", "docs/dist"])
def test_a_build_subpackage_is_not_a_build_product(path: str) -> None:
    assert not CandidateRules().generated(path, True)


def test_the_spec_extends_and_reduces_the_excludes() -> None:
    rules = rules_for(["*.sqlite", "/scratch/"], ["/dist/", "pkg/__pycache__/keep.pyc"], 10)
    assert rules.exclude[: len(BUILTIN_EXCLUDES)] == BUILTIN_EXCLUDES
    assert rules.generated("data/x.sqlite", False)
    assert rules.generated("scratch", True)
    assert rules.included("dist", True) and rules.included("dist/pkg-1.0.tar.gz", False)
    assert rules.included("pkg/__pycache__/keep.pyc", False)
    assert not rules.included("pkg/__pycache__/other.pyc", False)
    assert rules.may_include_under("pkg/__pycache__") and rules.may_include_under("pkg")
    assert not rules.may_include_under("node_modules")
    assert rules.generated_anywhere("build/lib/x.py")
    assert not rules.generated_anywhere("dist/x.whl")  # re-admitted
