"""Suppression comments: each family recognized and normalized, counted per file, and only the
ones a candidate adds beyond its base reported."""

from __future__ import annotations

from collections import Counter

import pytest

from overnight.gates.readers import Finding
from overnight.gates.suppressions import MARKERS, added_suppressions, suppressions_in


@pytest.mark.parametrize(
    ("path", "line", "normalized"),
    [
        ("a.py", "import os  # noqa", "# noqa"),
        ("a.py", "import os  # NOQA", "# noqa"),
        ("a.py", "import os  #noqa:F401", "# noqa: F401"),
        ("a.py", "import os  # noqa: F401,e501", "# noqa: E501, F401"),
        ("a.py", "import os  # noqa: E501, F401", "# noqa: E501, F401"),
        ("a.py", "# ruff: noqa", "# ruff: noqa"),
        ("a.py", "# ruff: noqa: F401", "# ruff: noqa: F401"),
        ("a.py", "# flake8: noqa", "# flake8: noqa"),
        ("a.py", "# Flake8: NoQA", "# flake8: noqa"),
        ("a.py", "x = f()  # type: ignore", "# type: ignore"),
        ("a.py", "x = f()  # type: ignore[arg-type]", "# type: ignore[arg-type]"),
        ("a.py", "x = f()  #type:ignore[misc,arg-type]", "# type: ignore[arg-type, misc]"),
        ("a.py", "# mypy: ignore-errors", "# mypy: ignore-errors"),
        (
            "a.py",
            '# mypy: disable-error-code="misc, arg-type"',
            "# mypy: disable-error-code=arg-type, misc",
        ),
        ("a.py", "x = f()  # pyright: ignore", "# pyright: ignore"),
        (
            "a.py",
            "x = f()  # pyright: ignore[reportCallIssue]",
            "# pyright: ignore[reportCallIssue]",
        ),
        (
            "a.py",
            "# pylint: disable=unused-import,line-too-long",
            "# pylint: disable=line-too-long, unused-import",
        ),
        ("a.py", "x = 1  # pylint: disable-next=C0103", "# pylint: disable-next=C0103"),
        ("a.py", "# pylint: skip-file", "# pylint: skip-file"),
        ("a.py", "# fmt: off", "# fmt: off"),
        ("a.py", "x = [1,2]  # fmt:skip", "# fmt: skip"),
        ("a.py", "import z  # isort: skip", "# isort: skip"),
        ("a.py", "# isort:skip_file", "# isort: skip_file"),
        ("a.js", "// eslint-disable-next-line no-console", "eslint-disable-next-line no-console"),
        ("a.js", "f(); // eslint-disable-line", "eslint-disable-line"),
        ("a.js", "/* eslint-disable */", "eslint-disable"),
        (
            "a.js",
            "/* eslint-disable no-alert, no-console */",
            "eslint-disable no-alert, no-console",
        ),
        (
            "a.js",
            "// eslint-disable-line no-console -- logging is fine here",
            "eslint-disable-line no-console",
        ),
        ("a.ts", "// @ts-ignore", "@ts-ignore"),
        ("a.ts", "// @ts-expect-error wrong on purpose", "@ts-expect-error"),
        ("a.ts", "// @ts-nocheck", "@ts-nocheck"),
        ("a.js", "// prettier-ignore", "prettier-ignore"),
        ("a.md", "<!-- prettier-ignore -->", "prettier-ignore"),
        ("a.yaml", "# prettier-ignore", "prettier-ignore"),
        ("a.html", "<!-- prettier-ignore-start -->", "prettier-ignore-start"),
    ],
)
def test_each_marker_is_recognized_and_normalized(path: str, line: str, normalized: str) -> None:
    assert suppressions_in(line + "\n", path) == Counter({normalized: 1})


def test_every_marker_family_is_exercised() -> None:
    names = {marker.name for marker in MARKERS}
    assert len(names) == len(MARKERS) >= 11


def test_a_file_wide_noqa_is_not_also_a_line_noqa() -> None:
    assert suppressions_in("# flake8: noqa\n", "a.py") == Counter({"# flake8: noqa": 1})


def test_two_markers_in_one_comment_both_count() -> None:
    found = suppressions_in("x = f()  # type: ignore[misc]  # noqa: E501\n", "a.py")
    assert found == Counter({"# type: ignore[misc]": 1, "# noqa: E501": 1})


def test_enabling_and_formatting_back_on_are_not_suppressions() -> None:
    text = "# fmt: on\n# pylint: enable=unused-import\n# isort: on\n"
    assert suppressions_in(text, "a.py") == Counter()
    assert suppressions_in("/* eslint-enable */\n", "a.js") == Counter()


def test_markers_in_python_strings_do_not_count() -> None:
    text = '''x = "# noqa"
y = '# type: ignore'
DOC = """
    import os  # noqa: F401
    # pylint: skip-file
"""
z = f"{x}  # fmt: skip"
'''
    assert suppressions_in(text, "mod.py") == Counter()


def test_broken_python_falls_back_to_lines_after_the_break() -> None:
    text = 'x = "# noqa"  # noqa: F401\ns = """never closed\n# type: ignore\n'
    found = suppressions_in(text, "broken.py")
    assert found == Counter({"# noqa: F401": 1, "# type: ignore": 1})


def test_broken_python_fallback_still_skips_quoted_text() -> None:
    text = "def f(:\n    pass\nx = (1,\ny = '# noqa'  # type: ignore\n"
    assert suppressions_in(text, "broken.py") == Counter({"# type: ignore": 1})


def test_other_files_need_a_comment_opener() -> None:
    text = 'const s = "eslint-disable";\nlet t = "@ts-ignore";\n// @ts-ignore\n'
    assert suppressions_in(text, "a.ts") == Counter({"@ts-ignore": 1})
    block = "/*\n * eslint-disable no-console\n */\n"
    assert suppressions_in(block, "a.js") == Counter({"eslint-disable no-console": 1})


def test_moving_a_suppression_adds_nothing() -> None:
    base = "import os  # noqa: F401\n\n\ndef f():\n    pass\n"
    new = "\n\ndef f():\n    pass\n\nimport os  # noqa:F401\n"
    assert added_suppressions("src/a.py", base, new) == []


def test_a_second_identical_suppression_adds_one() -> None:
    base = "import os  # noqa\n"
    new = "import os  # noqa\nimport sys  # noqa\n"
    assert added_suppressions("src/a.py", base, new) == [
        Finding(file="src/a.py", rule="suppression", message="adds `# noqa`", line=1)
    ]


def test_a_different_code_is_a_different_suppression() -> None:
    base = "import os  # noqa: F401\n"
    new = "import os  # noqa: F401, E501\n"
    found = added_suppressions("a.py", base, new)
    assert [f.message for f in found] == ["adds `# noqa: E501, F401`"]


def test_a_string_with_a_marker_adds_nothing() -> None:
    base = "x = 1\n"
    new = 'x = 1\nHELP = "append # noqa to silence flake8"\n'
    assert added_suppressions("a.py", base, new) == []


def test_a_new_file_counts_every_suppression() -> None:
    new = "import os  # noqa\nimport sys  # noqa\nx = f()  # type: ignore[misc]\n"
    found = added_suppressions("pkg/new.py", None, new)
    assert [(f.message, f.line) for f in found] == [
        ("adds `# noqa`", 1),
        ("adds `# noqa`", 1),
        ("adds `# type: ignore[misc]`", 3),
    ]
    assert all(f.file == "pkg/new.py" and f.rule == "suppression" for f in found)


def test_removing_suppressions_adds_nothing() -> None:
    assert added_suppressions("a.py", "import os  # noqa\n", "import os\n") == []


def test_added_suppressions_in_other_files() -> None:
    base = "// eslint-disable-next-line no-console\nconsole.log(1);\n"
    new = base + "// eslint-disable-next-line no-console\nconsole.log(2);\n// @ts-ignore\n"
    found = added_suppressions("web/app.ts", base, new)
    assert [f.text() for f in found] == [
        "web/app.ts:1: suppression adds `eslint-disable-next-line no-console`",
        "web/app.ts:5: suppression adds `@ts-ignore`",
    ]
