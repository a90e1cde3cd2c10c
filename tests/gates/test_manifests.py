"""Dependency manifests: which paths are manifests or lockfiles, and which changes to them
change the dependencies (a requirement added or re-pinned, a lockfile touched) rather than
only their layout or another part of the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overnight.gates.manifests import (
    LOCKFILES,
    MANIFEST_GLOBS,
    REQUIREMENTS_GLOBS,
    STRUCTURED_MANIFESTS,
    dependency_change,
    is_manifest,
)

# --- which paths are manifests --------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "requirements.txt",
        "requirements-dev.txt",
        "dev-requirements.txt",
        "requirements_test.txt",
        "requirements.in",
        "docs/requirements.txt",
        "requirements/base.txt",
        "requirements/dev.in",
        "ci/requirements/lint.txt",
        "constraints.txt",
        "constraints-py311.txt",
        "pyproject.toml",
        "packages/core/pyproject.toml",
        "setup.cfg",
        "Pipfile",
        "package.json",
        "web/app/package.json",
        *LOCKFILES,
        "frontend/yarn.lock",
        "sub/dir/uv.lock",
    ],
)
def test_manifests_and_lockfiles_at_any_depth(path: str) -> None:
    assert is_manifest(path)


@pytest.mark.parametrize(
    "path",
    [
        # "requirements" in a directory's name only
        "requirements-docs/README.md",
        "my_requirements/notes.txt",
        "requirements.d/notes.md",
        "requirements/README.md",
        "requirements/old/base.txt",
        # close, but not a manifest
        "requirements.py",
        "requirements.txt.orig",
        "src/requirements.json",
        "docs/requirements.rst",
        "constraints.py",
        "pyproject.toml.bak",
        "setup.py",
        "tox.ini",
        "Pipfile.txt",
        "package.json5",
        "poetry.lock.orig",
        "tsconfig.json",
        "README.md",
    ],
)
def test_other_paths_are_not_manifests(path: str) -> None:
    assert not is_manifest(path)


def test_the_manifest_globs_are_the_requirements_lockfiles_and_structured_manifests() -> None:
    assert set(MANIFEST_GLOBS) == {*REQUIREMENTS_GLOBS, *LOCKFILES, *STRUCTURED_MANIFESTS}
    for name in (*LOCKFILES, *STRUCTURED_MANIFESTS):
        assert is_manifest(name)
        assert is_manifest(f"deep/down/{name}")


def test_a_change_to_a_file_that_is_not_a_manifest_is_not_a_dependency_change() -> None:
    assert dependency_change("requirements-docs/README.md", "a==1\n", "a==2\n") is None
    assert dependency_change("src/app.py", None, "import requests\n") is None
    assert dependency_change("tox.ini", "[testenv]\ndeps = a\n", "[testenv]\ndeps = b\n") is None


def test_no_change_is_no_dependency_change() -> None:
    for path in ("requirements.txt", "poetry.lock", "pyproject.toml", "package.json"):
        assert dependency_change(path, "same", "same") is None
        assert dependency_change(path, None, None) is None


# --- requirements files ------------------------------------------------------------------


def test_a_requirement_added_removed_or_repinned_is_a_change() -> None:
    base = "requests==2.31.0\nclick>=8\n"
    said = "changes the requirements in requirements.txt"
    assert dependency_change("requirements.txt", base, base + "rich\n") == said
    assert dependency_change("requirements.txt", base, "requests==2.31.0\n") == said
    assert dependency_change("requirements.txt", base, "requests==2.32.0\nclick>=8\n") == said
    assert dependency_change("requirements.txt", base, base + "-r extra.txt\n") == said


def test_requirements_in_a_requirements_directory() -> None:
    said = dependency_change("requirements/dev.txt", "pytest\n", "pytest>=8\n")
    assert said == "changes the requirements in requirements/dev.txt"
    said = dependency_change("constraints.txt", "urllib3<2\n", "urllib3<3\n")
    assert said == "changes the requirements in constraints.txt"


@pytest.mark.parametrize(
    "after",
    [
        "# pinned for the CI\nrequests==2.31.0\nclick>=8\n",
        "requests==2.31.0  # the HTTP client\nclick>=8\n",
        "\n\nrequests==2.31.0\n\n   \nclick>=8\n",
        "click>=8\nrequests==2.31.0\n",
        "requests==2.31.0\r\nclick>=8\r\n",
        "requests==2.31.0\nclick>=8",
        "  requests==2.31.0   \nclick>=8\n",
        "requests==2.31.0 \\\n\nclick>=8\n",
    ],
)
def test_comments_blank_lines_order_and_line_endings_are_not_a_change(after: str) -> None:
    assert dependency_change("requirements.txt", "requests==2.31.0\nclick>=8\n", after) is None


def test_a_continued_requirement_is_one_line() -> None:
    base = "requests==2.31.0 \\\n    --hash=sha256:aaa\n"
    assert (
        dependency_change("requirements.txt", base, "requests==2.31.0 --hash=sha256:aaa\n") is None
    )
    changed = "requests==2.31.0 \\\n    --hash=sha256:bbb\n"
    assert dependency_change("requirements.txt", base, changed) is not None


def test_a_hash_inside_a_url_is_not_a_comment() -> None:
    base = "pkg @ https://example.org/pkg-1.0.tar.gz#egg=pkg\n"
    after = "pkg @ https://example.org/pkg-2.0.tar.gz#egg=pkg\n"
    assert dependency_change("requirements.txt", base, after) is not None
    fragment = "pkg @ https://example.org/pkg-1.0.tar.gz#sha256=bbb\n"
    assert dependency_change("requirements.txt", base, fragment) is not None


def test_an_added_and_a_deleted_requirements_file() -> None:
    assert dependency_change("requirements-dev.txt", None, "pytest\n") == (
        "adds the requirements in requirements-dev.txt"
    )
    assert dependency_change("requirements-dev.txt", "pytest\n", None) == (
        "deletes the requirements in requirements-dev.txt"
    )


def test_a_requirements_file_with_no_requirements_added_or_deleted_is_not_a_change() -> None:
    assert dependency_change("requirements.txt", None, "# nothing yet\n\n") is None
    assert dependency_change("requirements.txt", "", None) is None


# --- lockfiles ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", LOCKFILES)
def test_any_change_to_a_lockfile_is_a_dependency_change(name: str) -> None:
    path = f"app/{name}"
    assert dependency_change(path, "a\n", "a\n\n") == f"changes the lockfile {path}"
    assert dependency_change(path, "# comment\n", "# other comment\n") == (
        f"changes the lockfile {path}"
    )
    assert dependency_change(path, None, "") == f"adds the lockfile {path}"
    assert dependency_change(path, "a\n", None) == f"deletes the lockfile {path}"


def test_a_real_looking_lockfile_change() -> None:
    base = '[[package]]\nname = "idna"\nversion = "3.6"\n'
    after = '[[package]]\nname = "idna"\nversion = "3.7"\n'
    assert dependency_change("uv.lock", base, after) == "changes the lockfile uv.lock"
    lock = {"name": "x", "lockfileVersion": 3, "packages": {}}
    relocked = {**lock, "packages": {"node_modules/a": {"version": "1.0.0"}}}
    assert dependency_change("package-lock.json", json.dumps(lock), json.dumps(relocked)) == (
        "changes the lockfile package-lock.json"
    )


# --- pyproject.toml -----------------------------------------------------------------------

PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "demo"
version = "1.0"
dependencies = ["requests>=2.31", "click>=8"]

[project.optional-dependencies]
dev = ["pytest>=8"]

[tool.ruff]
line-length = 100
"""


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def test_a_project_dependency_change_names_its_table() -> None:
    after = edit(PYPROJECT, '"click>=8"]', '"click>=8", "rich"]')
    assert dependency_change("pyproject.toml", PYPROJECT, after) == (
        "changes the dependencies in pyproject.toml ([project] dependencies)"
    )


def test_a_change_elsewhere_in_pyproject_is_not_a_dependency_change() -> None:
    ruff = edit(PYPROJECT, "line-length = 100", 'line-length = 120\nselect = ["E"]')
    assert dependency_change("pyproject.toml", PYPROJECT, ruff) is None
    version = edit(PYPROJECT, 'version = "1.0"', 'version = "1.1"\ndescription = "d"')
    assert dependency_change("pyproject.toml", PYPROJECT, version) is None
    new_tool = PYPROJECT + "\n[tool.mypy]\nstrict = true\n[tool.uv]\nnative-tls = true\n"
    assert dependency_change("pyproject.toml", PYPROJECT, new_tool) is None
    comment = edit(PYPROJECT, "[project]\n", "# the package\n[project]\n")
    assert dependency_change("pyproject.toml", PYPROJECT, comment) is None


def test_a_dependency_list_reordered_or_respaced_is_not_a_change() -> None:
    after = edit(
        PYPROJECT,
        'dependencies = ["requests>=2.31", "click>=8"]',
        'dependencies = [\n    "click >= 8",\n    "requests>=2.31",\n]',
    )
    assert dependency_change("pyproject.toml", PYPROJECT, after) is None


@pytest.mark.parametrize(
    ("old", "new", "label"),
    [
        (
            'dev = ["pytest>=8"]',
            'dev = ["pytest>=8", "hypothesis"]',
            "[project] optional-dependencies",
        ),
        ('requires = ["hatchling"]', 'requires = ["hatchling>=1.20"]', "[build-system] requires"),
    ],
)
def test_the_other_project_tables(old: str, new: str, label: str) -> None:
    after = edit(PYPROJECT, old, new)
    assert dependency_change("pyproject.toml", PYPROJECT, after) == (
        f"changes the dependencies in pyproject.toml ({label})"
    )


@pytest.mark.parametrize(
    ("base", "after", "label"),
    [
        (
            '[dependency-groups]\ndev = ["pytest"]\n',
            '[dependency-groups]\ndev = ["pytest", "ruff"]\n',
            "[dependency-groups]",
        ),
        (
            '[tool.poetry.dependencies]\npython = "^3.11"\n',
            '[tool.poetry.dependencies]\npython = "^3.11"\nrequests = "^2.31"\n',
            "[tool.poetry.dependencies]",
        ),
        (
            '[tool.poetry.group.test.dependencies]\npytest = "^8"\n',
            '[tool.poetry.group.test.dependencies]\npytest = "^7"\n',
            "[tool.poetry.group.*.dependencies]",
        ),
        (
            '[tool.poetry.group.test.dependencies]\npytest = "^8"\n',
            '[tool.poetry.group.test.dependencies]\npytest = "^8"\n'
            '[tool.poetry.group.docs.dependencies]\nsphinx = "*"\n',
            "[tool.poetry.group.*.dependencies]",
        ),
        (
            '[tool.poetry.dev-dependencies]\npytest = "^8"\n',
            '[tool.poetry.dev-dependencies]\npytest = "^8.1"\n',
            "[tool.poetry.dev-dependencies]",
        ),
        (
            '[tool.pdm.dev-dependencies]\ntest = ["pytest"]\n',
            '[tool.pdm.dev-dependencies]\ntest = ["pytest", "coverage"]\n',
            "[tool.pdm.dev-dependencies]",
        ),
        (
            '[tool.uv]\ndev-dependencies = ["pytest"]\n',
            '[tool.uv]\ndev-dependencies = ["pytest>=8"]\n',
            "[tool.uv] dev-dependencies",
        ),
        (
            "[tool.uv]\n",
            '[tool.uv]\noverride-dependencies = ["numpy<2"]\n',
            "[tool.uv] override-dependencies",
        ),
        (
            "[tool.uv]\n",
            '[tool.uv]\nconstraint-dependencies = ["idna<4"]\n',
            "[tool.uv] constraint-dependencies",
        ),
        (
            "[tool.uv]\n",
            '[tool.uv.sources]\nlib = { git = "https://example.org/lib" }\n',
            "[tool.uv.sources]",
        ),
    ],
)
def test_the_tool_dependency_tables(base: str, after: str, label: str) -> None:
    assert dependency_change("pyproject.toml", base, after) == (
        f"changes the dependencies in pyproject.toml ({label})"
    )


def test_a_poetry_group_setting_that_is_not_its_dependencies_is_not_a_change() -> None:
    base = (
        "[tool.poetry.group.docs]\noptional = false\n"
        '[tool.poetry.group.docs.dependencies]\nsphinx = "*"\n'
    )
    after = base.replace("optional = false", "optional = true")
    assert dependency_change("pyproject.toml", base, after) is None


def test_several_tables_changed_are_all_named() -> None:
    after = edit(PYPROJECT, '"click>=8"]', '"click>=9"]')
    after = edit(after, 'requires = ["hatchling"]', 'requires = ["setuptools"]')
    assert dependency_change("pyproject.toml", PYPROJECT, after) == (
        "changes the dependencies in pyproject.toml"
        " ([project] dependencies, [build-system] requires)"
    )


def test_an_added_and_a_deleted_pyproject() -> None:
    assert dependency_change("pkg/pyproject.toml", None, PYPROJECT) == (
        "adds the dependencies in pkg/pyproject.toml ([project] dependencies,"
        " [project] optional-dependencies, [build-system] requires)"
    )
    assert dependency_change("pyproject.toml", PYPROJECT, None) == (
        "deletes the dependencies in pyproject.toml ([project] dependencies,"
        " [project] optional-dependencies, [build-system] requires)"
    )


def test_a_pyproject_added_or_deleted_without_dependencies_is_not_a_change() -> None:
    tools_only = "[tool.ruff]\nline-length = 100\n"
    assert dependency_change("pyproject.toml", None, tools_only) is None
    assert dependency_change("pyproject.toml", tools_only, None) is None


def test_a_pyproject_that_does_not_parse_may_have_changed_its_dependencies() -> None:
    broken = PYPROJECT + "[project\n"
    said = dependency_change("pyproject.toml", PYPROJECT, broken)
    assert said is not None
    assert said.startswith("changes pyproject.toml, which does not parse as TOML after the change")
    assert said.endswith(": its dependencies may have changed")
    said = dependency_change("pyproject.toml", broken, PYPROJECT)
    assert said is not None and "does not parse as TOML before the change" in said


def test_a_pyproject_with_odd_shapes_yields_no_crash() -> None:
    base = 'project = "not a table"\ntool = 3\n'
    after = '[project]\ndependencies = "requests"\n[tool]\npoetry = []\n'
    assert dependency_change("pyproject.toml", base, after) == (
        "changes the dependencies in pyproject.toml ([project] dependencies)"
    )


# --- Pipfile ---------------------------------------------------------------------------


def test_pipfile_packages_against_its_other_tables() -> None:
    base = (
        '[packages]\nrequests = "*"\n[dev-packages]\npytest = "*"\n'
        '[requires]\npython_version = "3.11"\n'
    )
    assert dependency_change(
        "Pipfile", base, base.replace('requests = "*"', 'requests = "==2.31"')
    ) == ("changes the dependencies in Pipfile ([packages])")
    assert dependency_change("Pipfile", base, base.replace('pytest = "*"', 'pytest = ">=8"')) == (
        "changes the dependencies in Pipfile ([dev-packages])"
    )
    assert dependency_change("Pipfile", base, base.replace("3.11", "3.12")) is None


# --- setup.cfg -----------------------------------------------------------------------------

SETUP_CFG = """\
[metadata]
name = demo
version = 1.0

[options]
packages = find:
python_requires = >=3.11
install_requires =
    requests>=2.31
    click>=8
setup_requires =
    setuptools_scm

[options.extras_require]
dev =
    pytest>=8

[flake8]
max-line-length = 100
"""


def test_setup_cfg_install_requires_is_a_dependency_change() -> None:
    after = edit(SETUP_CFG, "    click>=8\n", "    click>=8\n    rich\n")
    assert dependency_change("setup.cfg", SETUP_CFG, after) == (
        "changes the dependencies in setup.cfg ([options] install_requires)"
    )


@pytest.mark.parametrize(
    ("old", "new", "label"),
    [
        ("    setuptools_scm\n", "    setuptools_scm>=8\n", "[options] setup_requires"),
        ("    pytest>=8\n", "    pytest>=8\n    hypothesis\n", "[options.extras_require]"),
        ("dev =\n", "test =\n", "[options.extras_require]"),
    ],
)
def test_setup_cfg_other_dependency_options(old: str, new: str, label: str) -> None:
    after = edit(SETUP_CFG, old, new)
    assert dependency_change("setup.cfg", SETUP_CFG, after) == (
        f"changes the dependencies in setup.cfg ({label})"
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("max-line-length = 100", "max-line-length = 120"),
        ("version = 1.0", "version = 1.1"),
        ("python_requires = >=3.11", "python_requires = >=3.12"),
        ("packages = find:", "packages = demo"),
        (
            "    requests>=2.31\n    click>=8\n",
            "    click>=8\n    # the HTTP client\n    requests>=2.31\n",
        ),
        ("[flake8]\n", "[mypy]\nstrict = True\n\n[flake8]\n"),
    ],
)
def test_setup_cfg_other_sections_and_layout_are_not_a_change(old: str, new: str) -> None:
    assert dependency_change("setup.cfg", SETUP_CFG, edit(SETUP_CFG, old, new)) is None


def test_an_added_and_a_deleted_setup_cfg() -> None:
    labels = "[options] install_requires, [options] setup_requires, [options.extras_require]"
    assert dependency_change("setup.cfg", None, SETUP_CFG) == (
        f"adds the dependencies in setup.cfg ({labels})"
    )
    assert dependency_change("setup.cfg", SETUP_CFG, None) == (
        f"deletes the dependencies in setup.cfg ({labels})"
    )
    # Only what the file had is named; a file without dependency options has none to add.
    only = "[options]\ninstall_requires = requests\n"
    assert dependency_change("setup.cfg", only, None) == (
        "deletes the dependencies in setup.cfg ([options] install_requires)"
    )
    assert dependency_change("setup.cfg", None, "[flake8]\nmax-line-length = 100\n") is None
    assert dependency_change("setup.cfg", "[options]\ninstall_requires =\n", None) is None


@pytest.mark.parametrize(
    "broken",
    [
        "install_requires = requests\n",  # no section header
        "[options\ninstall_requires = requests\n",
        "[options]\ninstall_requires = a\n[options]\ninstall_requires = b\n",  # a duplicate
    ],
)
def test_a_setup_cfg_that_does_not_parse_may_have_changed_its_dependencies(broken: str) -> None:
    said = dependency_change("setup.cfg", SETUP_CFG, broken)
    assert said is not None
    assert said.startswith("changes setup.cfg, which does not parse as INI after the change (")
    assert said.endswith(": its dependencies may have changed")


def test_a_percent_sign_in_setup_cfg_is_not_an_interpolation() -> None:
    base = "[options]\ninstall_requires =\n    pkg @ https://example.org/pkg%201.tar.gz\n"
    after = base.replace("%201", "%202")
    assert dependency_change("setup.cfg", base, after) == (
        "changes the dependencies in setup.cfg ([options] install_requires)"
    )


# --- package.json -----------------------------------------------------------------------

PACKAGE = {
    "name": "web",
    "version": "1.0.0",
    "scripts": {"lint": "eslint .", "build": "vite build"},
    "dependencies": {"react": "^18.2.0"},
    "devDependencies": {"eslint": "^9.0.0"},
}


def package(**changes: object) -> str:
    return json.dumps({**PACKAGE, **changes}, indent=2)


@pytest.mark.parametrize(
    ("changes", "label"),
    [
        ({"dependencies": {"react": "^18.3.0"}}, "dependencies"),
        ({"dependencies": {"react": "^18.2.0", "zod": "^3"}}, "dependencies"),
        ({"devDependencies": {}}, "devDependencies"),
        ({"peerDependencies": {"react": ">=18"}}, "peerDependencies"),
        ({"optionalDependencies": {"fsevents": "*"}}, "optionalDependencies"),
    ],
)
def test_package_json_dependency_fields(changes: dict[str, object], label: str) -> None:
    assert dependency_change("web/package.json", package(), package(**changes)) == (
        f"changes the dependencies in web/package.json ({label})"
    )


def test_package_json_scripts_and_layout_are_not_a_dependency_change() -> None:
    base = package()
    scripts = package(scripts={"lint": "eslint --max-warnings 0 .", "test": "vitest"})
    assert dependency_change("package.json", base, scripts) is None
    assert dependency_change("package.json", base, package(version="1.0.1")) is None
    assert dependency_change("package.json", base, json.dumps(PACKAGE)) is None  # re-indented


def test_an_added_and_a_deleted_package_json() -> None:
    labels = "dependencies, devDependencies"
    assert dependency_change("package.json", None, package()) == (
        f"adds the dependencies in package.json ({labels})"
    )
    assert dependency_change("package.json", package(), None) == (
        f"deletes the dependencies in package.json ({labels})"
    )
    scripts_only = json.dumps({"scripts": {"lint": "eslint ."}})
    assert dependency_change("package.json", None, scripts_only) is None


def test_a_package_json_that_does_not_parse_may_have_changed_its_dependencies() -> None:
    said = dependency_change("package.json", package(), package()[:-2])
    assert said is not None
    assert said.startswith("changes package.json, which does not parse as JSON after the change (")
    assert said.endswith(": its dependencies may have changed")


def test_a_package_json_that_is_not_an_object_yields_no_crash() -> None:
    assert dependency_change("package.json", "[1]", "[2]") is None
    assert dependency_change("package.json", '"a"', package()) == (
        "changes the dependencies in package.json (dependencies, devDependencies)"
    )


# --- the texts as files on disk ---------------------------------------------------------


def test_a_manifest_read_from_disk_with_its_real_encoding(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_bytes("requests==2.31.0\r\n# café\r\n".encode())
    base = path.read_text(encoding="utf-8")
    path.write_bytes("requests==2.31.0\n# caf\u00e9 au lait\n".encode())
    after = path.read_text(encoding="utf-8")
    assert base != after
    assert dependency_change("requirements.txt", base, after) is None
