"""Reading a check's findings: the real outputs of ruff, mypy, flake8 and pylint on small trees
(each tree in a directory of its own, so absolute paths differ between base and candidate),
recorded outputs of pyright and eslint in their documented formats, and the differences that
decide what a candidate added."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from overnight.gates.readers import (
    READERS,
    Finding,
    FindingsUnreadable,
    new_findings,
    normalize_message,
    program_of,
    read_findings,
    reader_for,
    relative_path,
    removed_findings,
)

OUTPUTS = Path(__file__).parent / "findings_outputs"

#: The base tree's module: an unused import and variable, a wrong return type, and a
#: redefinition whose message names the line of the first definition.
BASE = """\
import os


def first() -> str:
    unused = 1
    return 1


def twice() -> None:
    pass


def twice() -> None:
    pass
"""
#: The same code three lines further down: every line number, in messages too, changes.
MOVED = BASE.replace("import os\n", "import os\n\n# one\n# two\n# three\n", 1)
#: A second function with the same faults as ``first``: the same findings once more.
COPIED = (
    BASE
    + """

def second() -> str:
    unused = 1
    return 1
"""
)
#: The unused import and the wrong return type fixed.
FIXED = BASE.replace("import os\n\n\n", "", 1).replace("return 1", 'return "one"')

TREES = {"base": BASE, "moved": MOVED, "copied": COPIED, "fixed": FIXED}


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One checkout per variant, each at a different absolute path."""
    roots: dict[str, Path] = {}
    for name, source in TREES.items():
        root = tmp_path_factory.mktemp(f"tree-{name}")
        (root / "pkg").mkdir()
        (root / "pkg" / "__init__.py").write_text("")
        (root / "pkg" / "mod.py").write_text(source)
        roots[name] = root
    return roots


def _run(command: list[str], root: Path) -> tuple[str, int]:
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300)
    return done.stdout, done.returncode


def _python(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install {module})")


#: Each real tool: how it is run in a tree (absolute paths where the tool can print them) and
#: the rules of the findings ``COPIED`` adds and ``FIXED`` removes.
TOOLS: dict[str, tuple[Callable[[Path], list[str]], list[str], list[str]]] = {
    "ruff": (
        lambda root: _python(
            "ruff", "check", "--isolated", "--output-format=json", "--no-cache", "."
        ),
        ["F841"],
        ["F401"],
    ),
    "mypy": (
        lambda root: _python(
            "mypy",
            "--config-file=",
            "--no-pretty",
            "--show-absolute-path",
            "--cache-dir=/dev/null",
            str(root / "pkg"),
        ),
        ["return-value"],
        ["return-value"],
    ),
    "flake8": (
        lambda root: _python("flake8", "--isolated", str(root)),
        ["F841"],
        ["F401"],
    ),
    "pylint": (
        lambda root: _python("pylint", "--output-format=json", "--persistent=n", str(root / "pkg")),
        ["missing-function-docstring", "unused-variable"],
        ["unused-import"],
    ),
}


@pytest.fixture(scope="module")
def tool_findings(trees: dict[str, Path]) -> Callable[[str], dict[str, list[Finding]]]:
    """The findings of one real tool in every tree (run once per tool)."""
    cache: dict[str, dict[str, list[Finding]]] = {}

    def findings_of(tool: str) -> dict[str, list[Finding]]:
        if tool not in cache:
            command = TOOLS[tool][0]
            results: dict[str, list[Finding]] = {}
            for name, root in trees.items():
                words = command(root)
                output, code = _run(words, root)
                results[name] = read_findings(reader_for(words), output, code, str(root))
            cache[tool] = results
        return cache[tool]

    return findings_of


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_real_tool_findings_are_identified_by_file_rule_and_text(
    tool: str, tool_findings: Callable[[str], dict[str, list[Finding]]]
) -> None:
    _needs(tool)
    found = tool_findings(tool)
    _command, added_rules, removed_rules = TOOLS[tool]
    base = found["base"]
    assert base, f"{tool} found nothing in the base tree"
    # Paths are relative to each tree's root, whatever the tool printed.
    assert {f.file for f in base} == {"pkg/mod.py"}
    assert all(f.line is not None and f.line > 0 for f in base)
    # Code that only moved (every line number changed, in messages too) adds nothing.
    assert [f.line for f in found["moved"]] != [f.line for f in base]
    assert new_findings(base, found["moved"]) == []
    assert removed_findings(base, found["moved"]) == []
    # A second copy of existing findings is new: the count of a key matters.
    assert sorted(f.rule for f in new_findings(base, found["copied"])) == added_rules
    assert removed_findings(base, found["copied"]) == []
    # What a candidate fixed shows on the other side.
    assert new_findings(base, found["fixed"]) == []
    assert sorted({f.rule for f in removed_findings(base, found["fixed"])}) == removed_rules


def test_ruff_json_reads_code_message_and_row(
    tool_findings: Callable[[str], dict[str, list[Finding]]],
) -> None:
    base = tool_findings("ruff")["base"]
    unused_import = next(f for f in base if f.rule == "F401")
    assert unused_import == Finding("pkg/mod.py", "F401", "`os` imported but unused", 1)
    assert unused_import.text() == "pkg/mod.py:1: F401 `os` imported but unused"
    redefinition = next(f for f in base if f.rule == "F811")
    assert "line #" in redefinition.message and "9" not in redefinition.message


def test_mypy_reads_error_lines_and_skips_notes_and_summaries(tmp_path: Path) -> None:
    (tmp_path / "n.py").write_text("def f(x: int = None) -> None:\n    pass\n\nreveal_type(1)\n")
    command = _python("mypy", "--config-file=", "--no-pretty", "--cache-dir=/dev/null", "n.py")
    output, code = _run(command, tmp_path)
    assert "note:" in output and "Found 1 error" in output  # what is skipped is there
    found = read_findings("mypy", output, code, str(tmp_path))
    assert [(f.file, f.rule, f.line) for f in found] == [("n.py", "assignment", 1)]


def test_mypy_column_numbers_and_redefinitions(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(BASE)
    command = _python(
        "mypy", "--config-file=", "--show-column-numbers", "--cache-dir=/dev/null", "pkg"
    )
    output, code = _run(command, tmp_path)
    assert "pkg/mod.py:6:12: error:" in output
    found = read_findings("mypy", output, code, str(tmp_path))
    assert [f.key() for f in found] == [
        (
            "pkg/mod.py",
            "return-value",
            'Incompatible return value type (got "int", expected "str")',
        ),
        ("pkg/mod.py", "no-redef", 'Name "twice" already defined on line #'),
    ]


def test_mypy_that_cannot_run_is_unreadable(tmp_path: Path) -> None:
    command = _python("mypy", "--config-file=", "--cache-dir=/dev/null", "missing.py")
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    with pytest.raises(FindingsUnreadable, match="mypy"):
        read_findings("mypy", done.stdout + done.stderr, done.returncode, str(tmp_path))


def test_mypy_crash_is_unreadable() -> None:
    crash = (OUTPUTS / "mypy_crash.txt").read_text()
    with pytest.raises(FindingsUnreadable, match="crashed"):
        read_findings("mypy", crash, 2, "/home/dev/project")


def test_flake8_paths_lose_their_dot_prefix(trees: dict[str, Path]) -> None:
    _needs("flake8")
    root = trees["base"]
    output, code = _run(_python("flake8", "--isolated", "."), root)
    assert output.startswith("./pkg/mod.py:")
    found = read_findings("flake8", output, code, str(root))
    assert found[0] == Finding("pkg/mod.py", "F401", "'os' imported but unused", 1)


def test_pyright_json_counts_errors_and_warnings() -> None:
    output = (OUTPUTS / "pyright.json").read_text()
    found = read_findings("pyright-json", output, 1, "/home/dev/project")
    assert [(f.file, f.rule, f.line) for f in found] == [
        ("src/app/models.py", "reportMissingImports", 3),
        ("src/app/models.py", "reportArgumentType", 12),
        ("src/app/models.py", "reportUnusedImport", 1),
        ("src/app/views.py", "", 21),  # a syntax error has no rule
    ]
    # A message of several lines is one line, its indentation collapsed.
    assert found[1].message.endswith(
        'in function "repeat" "Literal[\'3\']" is not assignable to "int"'
    )


def test_pyright_moved_and_elsewhere_is_not_new() -> None:
    output = (OUTPUTS / "pyright.json").read_text()
    doc = json.loads(output)
    for diagnostic in doc["generalDiagnostics"]:
        diagnostic["file"] = diagnostic["file"].replace("/home/dev/project", "/srv/checkout")
        diagnostic["range"]["start"]["line"] += 5
    base = read_findings("pyright-json", output, 1, "/home/dev/project")
    moved = read_findings("pyright-json", json.dumps(doc), 1, "/srv/checkout")
    assert [f.line for f in moved] == [(f.line or 0) + 5 for f in base]
    assert new_findings(base, moved) == [] == removed_findings(base, moved)


def test_eslint_json_reads_every_file_and_parse_errors() -> None:
    output = (OUTPUTS / "eslint.json").read_text()
    found = read_findings("eslint-json", output, 1, "/home/dev/project")
    assert [f.text() for f in found] == [
        "web/fullOfProblems.js:1: no-unused-vars 'addOne' is defined but never used.",
        "web/fullOfProblems.js:2: use-isnan Use the isNaN function to compare with NaN.",
        "web/fullOfProblems.js:3: no-extra-semi Unnecessary semicolon.",
        "web/broken.js:3: syntax-error Parsing error: Unexpected token )",
    ]


def test_pylint_json_uses_the_symbol_as_rule(
    tool_findings: Callable[[str], dict[str, list[Finding]]],
) -> None:
    _needs("pylint")
    base = tool_findings("pylint")["base"]
    assert Finding("pkg/mod.py", "unused-import", "Unused import os", 1) in base
    redefined = next(f for f in base if f.rule == "function-redefined")
    assert redefined.message == "function already defined line #"


def test_exit_code_reader() -> None:
    assert read_findings("exit-code", "anything at all", 0, "/r") == []
    assert read_findings("exit-code", "", 3, "/r") == [Finding("", "exit", "exited 3")]
    assert Finding("", "exit", "exited 3").text() == "exit: exited 3"


@pytest.mark.parametrize("reader", ["ruff-json", "pyright-json", "pylint-json", "eslint-json"])
def test_json_readers_refuse_what_is_not_their_json(reader: str) -> None:
    assert read_findings(reader, "", 0, "/r") == []
    assert read_findings(reader, "  \n", 0, "/r") == []
    for garbage in ("Segmentation fault (core dumped)", "{not json", "42", '"text"'):
        with pytest.raises(FindingsUnreadable) as caught:
            read_findings(reader, garbage, 1, "/r")
        assert reader in str(caught.value)
    with pytest.raises(FindingsUnreadable, match="no output"):
        read_findings(reader, "", 2, "/r")


def test_unreadable_message_quotes_a_short_excerpt() -> None:
    with pytest.raises(FindingsUnreadable) as caught:
        read_findings("ruff-json", "error: unexpected argument\n" + "x" * 5000, 2, "/r")
    message = str(caught.value)
    assert "error: unexpected argument" in message and len(message) < 400


def test_json_with_a_warning_line_before_it_is_read() -> None:
    output = 'warning: the "extend" setting is deprecated\n[{"code": "F401", "message": "m",'
    output += ' "filename": "/r/a.py", "location": {"row": 3, "column": 1}}]\n'
    assert read_findings("ruff-json", output, 1, "/r") == [Finding("a.py", "F401", "m", 3)]


def test_json_of_the_wrong_shape_is_unreadable() -> None:
    with pytest.raises(FindingsUnreadable, match="'filename'"):
        read_findings("ruff-json", '[{"code": "F401", "message": "m"}]', 1, "/r")
    with pytest.raises(FindingsUnreadable, match="generalDiagnostics"):
        read_findings("pyright-json", '{"summary": {}}', 1, "/r")
    with pytest.raises(FindingsUnreadable):
        read_findings("eslint-json", '[{"filePath": "/r/a.js", "messages": 3}]', 1, "/r")


def test_ruff_syntax_error_without_code() -> None:
    output = '[{"code": null, "message": "SyntaxError: Unexpected token", "filename": "/r/a.py",'
    output += ' "location": {"row": 2, "column": 1}}]'
    assert read_findings("ruff-json", output, 1, "/r")[0].rule == "syntax-error"


def test_text_readers_refuse_tracebacks_and_silent_failures() -> None:
    traceback = 'Traceback (most recent call last):\n  File "x", line 1\nImportError: no plugin\n'
    for reader in ("flake8", "mypy"):
        with pytest.raises(FindingsUnreadable):
            read_findings(reader, traceback, 1, "/r")
        with pytest.raises(FindingsUnreadable, match="exit 2"):
            read_findings(reader, "something went wrong\n", 2, "/r")
        assert read_findings(reader, "", 0, "/r") == []
    summary = "Success: no issues found in 3 source files\n"
    assert read_findings("mypy", summary, 0, "/r") == []


def test_pylint_usage_error_is_unreadable() -> None:
    with pytest.raises(FindingsUnreadable, match="usage"):
        read_findings("pylint-json", "[]", 32, "/r")


def test_unknown_reader_names_the_choices() -> None:
    with pytest.raises(ValueError, match="ruff-json, flake8, mypy") as caught:
        read_findings("sarif", "", 0, "/r")
    assert not isinstance(caught.value, FindingsUnreadable)


def test_key_is_not_the_line_and_text_is_one_line() -> None:
    a = Finding("src/x.py", "F401", "`os` imported but unused", 12)
    b = Finding("src/x.py", "F401", "`os` imported but unused", 40)
    assert a.key() == b.key() == ("src/x.py", "F401", "`os` imported but unused")
    assert a.text() == "src/x.py:12: F401 `os` imported but unused"
    assert Finding("src/x.py", "", "odd\nthing\x1b[31m", None).text() == "src/x.py: odd thing"


def test_new_and_removed_are_multiset_differences() -> None:
    one = Finding("a.py", "E1", "m", 1)
    two = Finding("a.py", "E1", "m", 7)
    other = Finding("b.py", "E1", "m", 1)
    assert new_findings([one], [two]) == []
    assert new_findings([one], [two, one]) == [one]  # beyond the base's count, in order
    assert new_findings([one, one], [two]) == []
    assert removed_findings([one, one, other], [two]) == [one, other]
    assert removed_findings([], [one]) == []


@pytest.mark.parametrize(
    ("path", "root", "expected"),
    [
        ("/work/repo/src/a.py", "/work/repo", "src/a.py"),
        ("/work/repo/src/a.py", "/work/repo/", "src/a.py"),
        ("./src/a.py", "/work/repo", "src/a.py"),
        ("src\\pkg\\a.py", "/work/repo", "src/pkg/a.py"),
        ("C:\\work\\repo\\a.py", "C:\\work\\repo", "a.py"),
        ("/elsewhere/a.py", "/work/repo", "/elsewhere/a.py"),
        ("/work/repository/a.py", "/work/repo", "/work/repository/a.py"),
        ("", "/work/repo", ""),
    ],
)
def test_relative_path(path: str, root: str, expected: str) -> None:
    assert relative_path(path, root) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "Name 'x' already defined (defined on line 7)",
            "Name 'x' already defined (defined on line #)",
        ),
        ("Redefinition of unused `os` from line 12", "Redefinition of unused `os` from line #"),
        ("see /work/repo/src/b.py:12:5 for the other", "see src/b.py:#:# for the other"),
        ("overlaps lines 3-5, column 8", "overlaps lines #, column #"),
        ('Argument 1 to "f" has incompatible type', 'Argument 1 to "f" has incompatible type'),
        ("slice x[1:2] at 12:30", "slice x[1:2] at 12:30"),
        ("  spread\n   over\tlines  ", "spread over lines"),
    ],
)
def test_normalize_message(message: str, expected: str) -> None:
    assert normalize_message(message, "/work/repo") == expected


@pytest.mark.parametrize(
    ("command", "reader"),
    [
        ("ruff check --output-format=json .", "ruff-json"),
        ("python -m ruff check --output-format json --no-cache .", "ruff-json"),
        ("ruff check .", "exit-code"),
        ("ruff format .", "exit-code"),
        ("flake8 src", "flake8"),
        ("python3 -m flake8 --format=default .", "flake8"),
        ("flake8 --format=pylint .", "exit-code"),
        ("mypy src", "mypy"),
        ("dmypy run -- src", "mypy"),
        ("/usr/bin/python3.11 -I -m mypy --strict .", "mypy"),
        ("uv run mypy src", "mypy"),
        ("mypy -O json src", "exit-code"),
        ("pyright --outputjson", "pyright-json"),
        ("npx pyright --outputjson src", "pyright-json"),
        ("pyright src", "exit-code"),
        ("pylint --output-format=json pkg", "pylint-json"),
        ("python -m pylint -f json pkg", "pylint-json"),
        ("pylint pkg", "exit-code"),
        ("eslint -f json .", "eslint-json"),
        ("npx eslint --format json src", "eslint-json"),
        ("npx --yes eslint --format=json src", "eslint-json"),
        ("eslint .", "exit-code"),
        ("pytest -q", "exit-code"),
        ("make lint", "exit-code"),
        ("", "exit-code"),
        (["python", "-m", "ruff", "check", "--output-format=json", "."], "ruff-json"),
        ("FOO=1 env BAR=2 mypy 'unclosed", "mypy"),
    ],
)
def test_reader_for(command: str | list[str], reader: str) -> None:
    assert reader_for(command) == reader
    assert reader in READERS


def test_program_of() -> None:
    assert program_of("python -m mypy src") == ("mypy", ["src"])
    assert program_of("poetry run flake8 .") == ("flake8", ["."])
    assert program_of("poetry check") == ("poetry", ["check"])
    assert program_of("python script.py") == ("python", ["script.py"])
    assert program_of("") == ("", [])
