"""The module names a new top-level file of the agent's may not take: what the harness's
Python has installed, read from its site-packages without reading every distribution's
file list."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

from overnight.installed import installed_module_names


def test_every_importable_name_a_distribution_declares_is_known() -> None:
    names = installed_module_names()
    importable = {n for n in packages_distributions() if n.isidentifier()}
    assert importable <= names, sorted(importable - names)
    # The standard library, a namespace package's part, an editable install's source tree.
    assert {"json", "sqlite3", "pytest", "pydantic", "opentelemetry", "overnight"} <= names


def test_a_module_a_pth_file_adds_is_known_and_the_current_directory_is_not(
    tmp_path: Path,
) -> None:
    """A fresh interpreter whose site-packages holds a ``.pth`` naming a directory of its own:
    the modules there count; the files of the directory it was started in do not."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    extra = tmp_path / "extra"
    (extra / "fancy_pkg").mkdir(parents=True)
    (extra / "fancy_pkg" / "__init__.py").write_text("")
    (extra / "single_mod.py").write_text("")
    (Path(site) / "extra.pth").write_text(f"{extra}\nimport os\n")
    (Path(site) / "installed_mod.py").write_text("")
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "mine_here.py").write_text("")
    src = Path(__file__).resolve().parents[2] / "src"
    code = (
        "import sys; sys.path.insert(1, sys.argv[1]); "
        "from overnight.installed import installed_module_names as n; "
        "print(' '.join(sorted(n())))"
    )
    out = subprocess.run(
        [python, "-c", code, str(src)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": ""},
    ).stdout.split()
    assert {"fancy_pkg", "single_mod", "installed_mod", "json"} <= set(out)
    assert "mine_here" not in out
