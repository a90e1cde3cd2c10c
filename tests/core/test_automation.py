"""What runs by itself: which changes of a candidate count as changing an automation path,
whatever they are disguised as, and which the spec's ``allow_automation`` lets land."""

from __future__ import annotations

import pytest

from overnight.core.automation import (
    AUTOMATION_PATHS,
    AUTOMATION_REASON,
    Automation,
    AutomationChange,
    automation_changes,
    file_rule,
    fold,
    link_rule,
    resolve,
)
from overnight.core.candidate_rules import park_reason, too_large
from overnight.core.protect import ChangedPath


def found(
    *changes: tuple[str, str],
    new_links: dict[str, str | None] | None = None,
    base_links: dict[str, str] | None = None,
) -> list[AutomationChange]:
    return automation_changes(
        [ChangedPath(status, path) for status, path in changes], new_links, base_links
    )


@pytest.mark.parametrize(
    "path",
    [
        # CI
        ".github/workflows/ci.yml",
        ".github/workflows/nested/deep.yaml",
        ".github/actions/setup/action.yml",
        "tools/release/action.yaml",
        ".gitlab-ci.yml",
        ".circleci/config.yml",
        "azure-pipelines.yml",
        ".buildkite/pipeline.yml",
        "Jenkinsfile",
        ".travis.yml",
        ".gitea/workflows/x.yml",
        "bitbucket-pipelines.yml",
        # git
        ".gitattributes",
        "pkg/data/.gitattributes",
        ".gitmodules",
        ".lfsconfig",
        ".githooks/pre-commit",
        # the shell and editors
        ".envrc",
        "services/api/.envrc",
        ".env",
        ".env.local",
        "mise.toml",
        ".vscode/tasks.json",
        "sub/.vscode/settings.json",
        ".idea/workspace.xml",
        ".devcontainer/devcontainer.json",
        ".devcontainer.json",
        "project.code-workspace",
        ".nvim.lua",
        ".dir-locals.el",
        # commit hooks
        ".pre-commit-config.yaml",
        ".husky/pre-commit",
        "lefthook.yml",
        ".lintstagedrc.json",
        # package managers
        "package.json",
        "web/package.json",
        ".npmrc",
        ".yarnrc.yml",
        ".pnpmfile.cjs",
        "binding.gyp",
        # coding agents
        ".claude/settings.json",
        ".claude/settings.local.json",
        ".mcp.json",
        ".cursor/mcp.json",
        ".codex/config.toml",
        ".gemini/settings.json",
    ],
)
def test_each_family_is_an_automation_path(path: str) -> None:
    assert file_rule(path) is not None, path
    [hit] = found(("A", path))
    assert hit.reaches == path and hit.how == "path"


@pytest.mark.parametrize(
    "path",
    [
        "calc.py",
        ".github/ISSUE_TEMPLATE/bug.md",
        ".github/CODEOWNERS",
        ".github/dependabot.yml",
        "docs/workflows/ci.md",
        "workflows/ci.yml",
        "src/envrc.py",
        "environment.yml",
        "package-notes.json",
        "src/pkg/package.py",
        "vscode/tasks.json",
        "claude/settings.json",
        "pre-commit-config.yaml.md",
        ".editorconfig",
        "README~.md",
        "backup~",
    ],
)
def test_neighbours_are_not(path: str) -> None:
    assert file_rule(path) is None, path
    assert found(("A", path)) == []


@pytest.mark.parametrize(
    "path",
    [
        ".GitHub/Workflows/evil.yml",  # a case-insensitive checkout merges it with .github
        ".GITHUB/workflows/evil.yml",
        ".gıthub/workflows/evil.yml",  # dotless i: NTFS folds it onto I
        ".github./workflows/evil.yml",  # Windows drops a trailing dot
        ".envrc ",  # and a trailing space
        ".git\u200cattributes",  # HFS+ ignores the zero-width non-joiner
        ".VSCode/tasks.json",
        "PACKAGE.JSON",
        "GITHUB~1/workflows/evil.yml",  # a Windows short name can stand for .github
        "vscode~2/tasks.json",
    ],
)
def test_disguised_names_are_folded_as_a_file_system_would(path: str) -> None:
    assert file_rule(path) is not None, path


def test_every_documented_pattern_is_lower_case_and_folding_is_idempotent() -> None:
    for pattern, what in AUTOMATION_PATHS:
        assert pattern == pattern.lower() and what
    for name in (".GitHub", "ſ", "K", ".envrc. ."):
        assert fold(fold(name)) == fold(name)


def test_a_rename_counts_by_both_paths() -> None:
    # git's --no-renames shows a rename as a delete and an add.
    hits = found(("D", "templates/ci.yml"), ("A", ".github/workflows/ci.yml"))
    assert [h.path for h in hits] == [".github/workflows/ci.yml"]
    hits = found(("D", ".github/workflows/ci.yml"), ("A", "old/ci.yml"))
    assert [(h.path, h.status) for h in hits] == [(".github/workflows/ci.yml", "D")]
    assert "(deleted)" in hits[0].sentence()


def test_a_link_counts_by_its_own_path_and_by_the_directory_it_stands_for() -> None:
    assert link_rule(".github") is not None  # .github -> gh: gh/workflows runs
    assert link_rule("a/.github/workflows") is not None
    assert link_rule(".yarn") is not None
    assert link_rule("docs") is None
    hit, under = found(
        ("A", ".github"), ("A", "gh/workflows/evil.yml"), new_links={".github": "gh"}
    )
    assert (hit.path, hit.how) == (".github", "directory link")
    assert hit.sentence().startswith("`.github` is a symbolic link in place of a directory")
    assert (under.path, under.how, under.reaches) == (
        "gh/workflows/evil.yml",
        "through link",
        ".github",
    )


@pytest.mark.parametrize(
    ("link", "target", "reaches"),
    [
        ("ci.yml", ".github/workflows/ci.yml", ".github/workflows/ci.yml"),
        ("ci.yml", "./.github/workflows", ".github/workflows"),
        ("docs/ci.yml", "../.github/workflows/x.yml", ".github/workflows/x.yml"),
        ("ci.yml", "../../../../.github/workflows/x.yml", ".github/workflows/x.yml"),
        ("ci.yml", "/home/me/repo/.github/workflows/x.yml", "home/me/repo/.github/workflows/x.yml"),
        ("hooks", ".git/hooks", ".git/hooks"),
        ("cfg", "../../.git/config", ".git/config"),
        ("x", "GITHUB~1/workflows/a.yml", "GITHUB~1/workflows/a.yml"),
        ("ws", ".github", ".github"),
    ],
)
def test_a_link_counts_by_its_target(link: str, target: str, reaches: str) -> None:
    [hit] = found(("A", link), new_links={link: target})
    assert (hit.how, hit.reaches) == ("link target", reaches)
    assert f"is a symbolic link to `{reaches}`" in hit.sentence()


def test_a_link_whose_target_leads_there_through_another_link_counts() -> None:
    base = {"gh": ".github/workflows"}
    [hit] = found(("A", "ci.yml"), new_links={"ci.yml": "gh/ci.yml"}, base_links=base)
    assert (hit.how, hit.reaches) == ("link target", ".github/workflows/ci.yml")


def test_a_link_whose_target_cannot_be_read_counts() -> None:
    [hit] = found(("A", "x"), new_links={"x": None})
    assert hit.how == "unreadable link"


def test_a_file_an_automation_link_of_the_branch_points_to_counts() -> None:
    base = {".github/workflows/ci.yml": "../../ci/main.yml"}
    [hit] = found(("M", "ci/main.yml"), ("M", "calc.py"), base_links=base)
    assert (hit.path, hit.how, hit.reaches) == (
        "ci/main.yml",
        "through link",
        ".github/workflows/ci.yml",
    )
    assert "reached through the symbolic link `.github/workflows/ci.yml`" in hit.sentence()
    # A directory link: everything under what it stands for.
    base = {".vscode": "editor"}
    assert [h.path for h in found(("A", "editor/tasks.json"), base_links=base)] == [
        "editor/tasks.json"
    ]


def test_changing_a_link_on_the_way_counts_as_does_what_it_then_leads_to() -> None:
    base = {".github/workflows/ci.yml": "../../ci/main.yml", "ci": "ci-v1"}
    hits = found(
        ("T", "ci"),
        ("A", "evil/main.yml"),
        new_links={"ci": "evil"},
        base_links=base,
    )
    assert {h.path for h in hits} == {"ci", "evil/main.yml"}


def test_a_link_added_beside_the_file_it_points_to_names_both() -> None:
    hits = found(
        ("A", ".github/workflows/ci.yml"),
        ("A", "scripts/ci.yml"),
        new_links={".github/workflows/ci.yml": "../../scripts/ci.yml"},
    )
    assert [(h.path, h.how) for h in hits] == [
        (".github/workflows/ci.yml", "path"),
        ("scripts/ci.yml", "through link"),
    ]


def test_resolution_stops_at_a_loop_and_outside_the_repository() -> None:
    assert resolve("a", {"a": "b", "b": "a"})[0] is None
    assert resolve("a", {"a": "../x"})[0] is None
    assert resolve("a", {"a": "/etc"})[0] is None
    real, visited = resolve("d/a", {"d/a": "../b/c", "b": "e"})
    assert (real, visited) == ("e/c", ["d/a", "b"])
    # A loop through a target in the repository does not run away either.
    assert found(("M", "x"), base_links={".envrc": "x", "x": ".envrc"}) != []


def test_the_spec_allows_named_paths_as_written() -> None:
    allow = Automation((".github/workflows/**",))
    hits = found(
        ("A", ".github/workflows/ci.yml"),
        ("A", ".GitHub/workflows/ci.yml"),  # not what GitHub reads, nor what was allowed
        ("A", ".envrc"),
        ("A", ".github"),
        ("A", "ci.yml"),
        new_links={".github": "gh", "ci.yml": ".github/workflows/x.yml"},
    )
    blocked, allowed = allow.split(hits)
    assert [a.path for a in allowed] == [".github/workflows/ci.yml", "ci.yml"]
    assert [b.path for b in blocked] == [".GitHub/workflows/ci.yml", ".envrc", ".github"]
    assert Automation().split(hits) == (hits, [])


def test_the_park_reason_names_the_paths_and_what_judges_the_work_comes_first() -> None:
    hits = found(*(("A", f".husky/h{i}") for i in range(7)), ("A", ".envrc"))
    reason, lines = park_reason([], [], hits)
    assert reason.startswith(f"{AUTOMATION_REASON}: `.husky/h0`, `.husky/h1`")
    assert reason.endswith("`.husky/h4` (and 3 more)")
    assert lines[-1] == "`.envrc` is shell configuration loaded on entering the directory (created)"
    big = too_large("data.bin", 3 << 20, 1 << 20)
    reason, lines = park_reason([big], [], hits[:1])
    assert reason == f"{AUTOMATION_REASON}: `.husky/h0` (and 1 more)"
    reason, _ = park_reason([], ["`tests/x.py` is protected (changed): ..."], hits[:1])
    assert reason.startswith("changed what judges it: `tests/x.py`")


def test_links_too_costly_to_resolve_count_and_a_path_too_long_leads_nowhere() -> None:
    deep = "/".join(["d"] * 300)
    links: dict[str, str | None] = {f"l{i}": f"{deep}/x{i}" for i in range(1000)}
    hits = found(*(("A", p) for p in links), ("M", "calc.py"), new_links=links)
    assert {h.how for h in hits} == {"costly link"}
    assert "calc.py" not in {h.path for h in hits}  # no automation link could reach it
    assert hits and {h.path for h in hits} < set(links)  # those resolved in time are judged
    # With an automation link to resolve once the steps ran out, nothing is known safe.
    base = {".vscode": "editor"}
    every = found(*(("A", p) for p in links), ("M", "calc.py"), new_links=links, base_links=base)
    assert {h.path for h in every} == {*links, "calc.py"}
    assert "too many, too long or too deeply chained" in hits[-1].sentence()
    assert resolve("a", {"a": "/".join(["abcdefgh"] * 600)})[0] is None


# -- a coding agent's standing instructions ----------------------------------------------------

INSTRUCTIONS = "standing instructions a coding agent reads on start"

#: The files and directories coding agents read their standing instructions from by themselves.
INSTRUCTION_FILES = [
    "CLAUDE.md",
    "CLAUDE.local.md",
    "AGENTS.md",
    "AGENTS.override.md",
    "AGENT.md",
    "GEMINI.md",
    "QWEN.md",
    "CRUSH.md",
    "CRUSH.local.md",
    ".cursorrules",
    ".github/copilot-instructions.md",
    ".github/instructions/python.instructions.md",
    ".github/prompts/review.prompt.md",
    ".github/chatmodes/plan.chatmode.md",
    ".github/agents/reviewer.agent.md",
    ".windsurfrules",
    ".clinerules",
    ".clinerules/style.md",
    ".clinerules-code",
    ".roorules",
    ".roorules-code",
    ".kilocoderules",
    ".kilocode/rules/style.md",
    ".kiro/steering/product.md",
    ".junie/guidelines.md",
    ".amazonq/rules/style.md",
    ".augment-guidelines",
    ".augment/rules/style.md",
    ".rules",
    ".goosehints",
    ".trae/rules/project_rules.md",
    ".qoder/rules/style.md",
]


def odd_case(path: str) -> str:
    """``Claude.MD``: every other letter's case swapped."""
    return "".join(ch.swapcase() if i % 2 else ch for i, ch in enumerate(path))


@pytest.mark.parametrize("name", INSTRUCTION_FILES)
@pytest.mark.parametrize("where", ["top", "nested", "odd case", "nested odd case"])
def test_a_coding_agents_standing_instructions_are_an_automation_path(
    name: str, where: str
) -> None:
    path = name if where in ("top", "odd case") else f"pkg/sub/{name}"
    if "odd case" in where:
        path = odd_case(path)
    assert file_rule(path) == INSTRUCTIONS, path
    [hit] = found(("A", path))
    assert (hit.path, hit.reaches, hit.how, hit.what) == (path, path, "path", INSTRUCTIONS)
    assert hit.sentence() == f"`{path}` is {INSTRUCTIONS} (created)"


@pytest.mark.parametrize(
    "path", ["Claude.MD", "claude.md", "pkg/Agents.Md", ".GitHub/Copilot-Instructions.MD"]
)
def test_instructions_in_odd_case_count(path: str) -> None:
    assert file_rule(path) == INSTRUCTIONS, path


@pytest.mark.parametrize(
    "path",
    [
        # already under a coding agent's directory: still covered
        ".cursor/rules/style.mdc",
        ".windsurf/rules/style.md",
        ".claude/CLAUDE.md",
        ".roo/rules/style.md",
        ".gemini/styleguide.md",
    ],
)
def test_instructions_under_an_agents_directory_stay_covered(path: str) -> None:
    assert file_rule(path) is not None, path
    assert file_rule(odd_case(path)) is not None, path
    assert file_rule(f"pkg/sub/{path}") is not None, path


@pytest.mark.parametrize(
    "path",
    [
        "README.md",
        "docs/claude.md.txt",
        "agents.py",
        "src/agents.py",
        "src/rules.py",
        "rules.md",
        "docs/rules",
        "docs/agents/notes.md",
        "my-agents.md",
        "claude.mdx",
        "CLAUDE.txt",
        ".github/instructions.md",
        ".github/prompt.md",
        "github/instructions/python.instructions.md",
        "docs/copilot-instructions.txt",
        "cursorrules.md",
        "kiro/steering/product.md",
        ".amazonq/notes.md",
    ],
)
def test_look_alikes_of_instructions_are_not(path: str) -> None:
    assert file_rule(path) is None, path
    assert found(("A", path)) == []


def test_instructions_reached_through_a_link_count() -> None:
    # CLAUDE.md is often a link to AGENTS.md or to a guide: what it stands for counts.
    base = {"CLAUDE.md": "docs/agent-guide.md"}
    [hit] = found(("M", "docs/agent-guide.md"), ("M", "calc.py"), base_links=base)
    assert (hit.path, hit.how, hit.reaches, hit.what) == (
        "docs/agent-guide.md",
        "through link",
        "CLAUDE.md",
        INSTRUCTIONS,
    )
    [hit] = found(("A", "notes.md"), new_links={"notes.md": "AGENTS.md"})
    assert (hit.how, hit.reaches) == ("link target", "AGENTS.md")
    # a link standing for a directory of rules
    [hit] = found(("A", ".clinerules"), new_links={".clinerules": "docs/rules"})
    assert hit.what == INSTRUCTIONS
    [hit] = found(("A", ".amazonq"), new_links={".amazonq": "docs/q"})
    assert (hit.how, hit.what) == ("directory link", INSTRUCTIONS)


def test_allowing_instructions_allows_them_as_written() -> None:
    hits = found(("A", "AGENTS.md"), ("A", "pkg/AGENTS.md"), ("A", "agents.md"), ("A", "CLAUDE.md"))
    blocked, allowed = Automation(("AGENTS.md",)).split(hits)
    assert [a.path for a in allowed] == ["AGENTS.md", "pkg/AGENTS.md"]
    assert [b.path for b in blocked] == ["agents.md", "CLAUDE.md"]
    reason, lines = park_reason([], [], blocked)
    assert reason == f"{AUTOMATION_REASON}: `agents.md`, `CLAUDE.md`"
    assert lines == [
        f"`agents.md` is {INSTRUCTIONS} (created)",
        f"`CLAUDE.md` is {INSTRUCTIONS} (created)",
    ]
