"""Which installed pytest plugins a project's tests need: found, not guessed.

The harness runs every pytest command with plugin autoload off and loads only the spec's
``[predicate] pytest_plugins`` (``overnight.night.testrun``). A project whose configuration
names a plugin's option (``addopts = "--cov=pkg"``), ini key (``asyncio_mode = "auto"``),
marker or fixture then cannot start, or starts and fails, on the base commit. This module
says which plugin that is, and the line that loads it:

* ``installed_plugins``: one small script, run in the project's Python (the interpreter the
  predicate starts: ``project_python``) with autoload off, loads every ``pytest11`` entry
  point and calls its ``pytest_addoption`` with a parser of pytest's own (and its
  ``pytest_configure`` with a stand-in config that records the markers it registers), and
  says per entry point the options, ini keys, markers and fixtures it provides. It runs
  installed code only, the code a ``pytest --version`` would import: its working directory
  is an empty temporary directory, nothing of the checkout is put on its path, and its
  environment is the harness's scrubbed one. Bounded by a timeout; any failure is an empty
  answer with the reason, never an exception.
* ``read_config``: the project's pytest configuration, the file pytest would choose (in its
  precedence order), as the ``addopts`` words and the ini keys set.
* ``failed_names``: the names pytest's own output says it did not know (a usage error's
  ``unrecognized arguments``, ``Unknown config option``, an unknown marker, a fixture not
  found, async tests no plugin ran).
* ``advise``: those names matched to the plugins that provide them, as the plugins to load
  (``Advice.line``) and the names no installed plugin provides (``Advice.missing``).
"""

from __future__ import annotations

import configparser
import json
import os
import posixpath
import re
import shlex
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overnight.core.errors import OvernightError
from overnight.process import run_command, scrubbed_env

#: Seconds the finder may take (importing every installed plugin).
FIND_TIMEOUT_S = 60.0

#: The finder's answer is read up to this size.
_MAX_ANSWER = 1 << 20

#: What a well-known option, ini key, marker or fixture belongs to, for a name that no
#: installed plugin provides: the distribution to install. A prefix ends with ``-`` or ``_``.
KNOWN: dict[str, str] = {
    "--cov": "pytest-cov",
    "--cov-": "pytest-cov",
    "--no-cov": "pytest-cov",
    "--no-cov-on-fail": "pytest-cov",
    "--timeout": "pytest-timeout",
    "--timeout-": "pytest-timeout",
    "timeout": "pytest-timeout",
    "timeout_": "pytest-timeout",
    "--benchmark-": "pytest-benchmark",
    "benchmark": "pytest-benchmark",
    "asyncio_": "pytest-asyncio",
    "--asyncio-mode": "pytest-asyncio",
    "asyncio": "pytest-asyncio",
    "-n": "pytest-xdist",
    "--numprocesses": "pytest-xdist",
    "--dist": "pytest-xdist",
    "--maxprocesses": "pytest-xdist",
    "--reruns": "pytest-rerunfailures",
    "--reruns-delay": "pytest-rerunfailures",
    "flaky": "pytest-rerunfailures",
    "--randomly-seed": "pytest-randomly",
    "--html": "pytest-html",
    "--ds": "pytest-django",
    "DJANGO_SETTINGS_MODULE": "pytest-django",
    "django_db": "pytest-django",
    "mocker": "pytest-mock",
    "httpx_mock": "pytest-httpx",
    "anyio_backend": "anyio",
    "anyio": "anyio",
    "trio": "pytest-trio",
    "env": "pytest-env",
}

#: Distributions whose plugin runs ``async def`` tests.
ASYNC_DISTS = ("pytest-asyncio", "anyio", "pytest-trio", "pytest-tornasync", "pytest-twisted")

_FINDER = r'''
import argparse, contextlib, inspect, io, json, sys, warnings


def _quiet():
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def _said(exc):
    return ("%s: %s" % (type(exc).__name__, exc))[:300]


def _groups(parser):
    out = []
    for group in [getattr(parser, "_anonymous", None)] + list(getattr(parser, "_groups", [])):
        if group is not None and all(group is not g for g in out):
            out.append(group)
    return out


def _options(parser):
    names = []
    for group in _groups(parser):
        for option in getattr(group, "options", []):
            try:
                names.extend(str(n) for n in option.names())
            except Exception:
                pass
    return list(dict.fromkeys(names))


def _ini(parser):
    names = list(getattr(parser, "_inidict", {})) + list(getattr(parser, "_ini_aliases", {}))
    return list(dict.fromkeys(str(n) for n in names))


class _Config:
    """What a plugin's pytest_configure may ask of a config: the defaults of its own
    options and ini keys; the markers it registers are recorded."""

    def __init__(self, parser, pluginmanager):
        self._parser = parser
        self.pluginmanager = pluginmanager
        self.markers = []
        self.option = argparse.Namespace()
        for group in _groups(parser):
            for option in getattr(group, "options", []):
                try:
                    setattr(self.option, option.dest, option.default)
                except Exception:
                    pass
        self.inicfg = {}
        self.args = []

    def addinivalue_line(self, name, line):
        if name == "markers":
            mark = str(line).split(":", 1)[0].split("(", 1)[0].strip()
            if mark:
                self.markers.append(mark)

    def getini(self, name):
        entry = getattr(self._parser, "_inidict", {}).get(name)
        if entry is None:
            raise ValueError("unknown configuration value: %r" % (name,))
        return entry[-1]

    def getoption(self, name, default=None, skip=False):
        return getattr(self.option, name, default)

    def getvalue(self, name, path=None):
        return self.getoption(name)

    def issue_config_time_warning(self, warning, stacklevel):
        pass


def _call(plugin, name, kwargs, entry):
    hook = getattr(plugin, name, None)
    if not callable(hook):
        return
    try:
        # pluggy passes a hook only the arguments it names (pytest_addoption(parser) or
        # pytest_addoption(parser, pluginmanager))
        params = inspect.signature(hook).parameters
        with _quiet():
            done = hook(**{k: v for k, v in kwargs.items() if k in params})
            if inspect.isgenerator(done):  # a hook wrapper: its part before the yield
                try:
                    next(done)
                except StopIteration:
                    pass
                done.close()
    except (Exception, SystemExit) as exc:
        entry.setdefault("error", "%s: %s" % (name, _said(exc)))


def _fixtures(plugin, marker_of):
    names = []
    for attr, value in list(getattr(plugin, "__dict__", {}).items()):
        try:
            marker = marker_of(value)
        except Exception:
            continue
        if marker is not None:
            names.append(str(getattr(marker, "name", None) or getattr(value, "name", None) or attr))
    return list(dict.fromkeys(names))


def _dist(ep):
    dist = getattr(ep, "dist", None)
    return str(getattr(dist, "name", "") or "")


def main(out):
    answer = {"plugins": {}}
    try:
        from importlib.metadata import entry_points

        try:
            eps = list(entry_points(group="pytest11"))
        except TypeError:
            eps = list(entry_points().get("pytest11", []))
        from _pytest.config import PytestPluginManager
        from _pytest.config.argparsing import Parser
    except (Exception, SystemExit) as exc:
        answer["error"] = "cannot read pytest's plugins: " + _said(exc)
        eps = []
    try:
        from _pytest.fixtures import getfixturemarker
    except Exception:
        getfixturemarker = lambda obj: None
    for ep in eps:
        if ep.name in answer["plugins"]:
            continue
        entry = {"module": str(ep.value).split(":")[0], "dist": _dist(ep)}
        entry.update(options=[], ini=[], markers=[], fixtures=[])
        answer["plugins"][ep.name] = entry
        try:
            with _quiet():
                plugin = ep.load()
            try:
                parser = Parser(_ispytest=True)
            except TypeError:
                parser = Parser()
            manager = PytestPluginManager()
        except (Exception, SystemExit) as exc:
            entry["error"] = "load: " + _said(exc)
            continue
        _call(plugin, "pytest_addoption", {"parser": parser, "pluginmanager": manager}, entry)
        entry["options"] = _options(parser)
        entry["ini"] = _ini(parser)
        config = _Config(parser, manager)
        _call(plugin, "pytest_configure", {"config": config}, {})
        entry["markers"] = list(dict.fromkeys(config.markers))
        entry["fixtures"] = _fixtures(plugin, getfixturemarker)
    with open(out, "w", encoding="utf-8") as sink:
        json.dump(answer, sink)


main(sys.argv[1])
'''


@dataclass(frozen=True)
class Plugin:
    """An installed pytest plugin: its entry point (what ``-p`` takes) and what it provides."""

    name: str
    dist: str = ""
    module: str = ""
    options: tuple[str, ...] = ()
    ini: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()
    fixtures: tuple[str, ...] = ()
    error: str = ""
    """What failed while it was read (its import, its ``pytest_addoption``): what it provides
    is then what it had registered before."""

    def named(self) -> str:
        return f"{self.name} ({self.dist})" if self.dist and self.dist != self.name else self.name


@dataclass(frozen=True)
class Installed:
    """The finder's answer: the plugins by entry point name, or why there is none."""

    python: str
    plugins: dict[str, Plugin] = field(default_factory=dict)
    error: str = ""


def project_python(command: str, path: str | None = None) -> str:
    """The interpreter ``command`` (a pytest command) starts: its ``python`` word found on
    ``path``, or the interpreter of the ``pytest`` script's ``#!`` line; else ``python`` (or
    ``python3``) on ``path``; else the harness's own."""
    words = _command_words(command)
    if words:
        program = words[0]
        base = posixpath.basename(program)
        found = shutil.which(program, path=path)
        if found is not None and base.startswith("python"):
            return found
        if found is not None and base in ("pytest", "py.test"):
            interpreter = _shebang(Path(found), path)
            if interpreter is not None:
                return interpreter
    return shutil.which("python", path=path) or shutil.which("python3", path=path) or sys.executable


def _shebang(script: Path, path: str | None) -> str | None:
    try:
        with script.open("rb") as handle:
            first = handle.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if words and posixpath.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        if not words:
            return None
        words = [shutil.which(words[0], path=path) or ""]
    if words and posixpath.basename(words[0]).startswith("python") and os.access(words[0], os.X_OK):
        return words[0]
    return None


def installed_plugins(
    python: str, *, timeout_s: float = FIND_TIMEOUT_S, user_site: bool = True
) -> Installed:
    """What every ``pytest11`` entry point of ``python`` provides (see the module's doc).
    ``user_site``: False when the predicate runs sandboxed, where the home directory (and so
    the user's site-packages) is out of sight."""
    with tempfile.TemporaryDirectory(prefix="overnight-plugins-") as tmp:
        where = Path(tmp)
        out = where / "answer.json"
        env = scrubbed_env()
        # autoload off, as the predicate runs: importing pytest itself loads nothing more
        env.update({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"})
        argv = [python, *([] if user_site else ["-s"]), "-c", _FINDER, str(out)]
        try:
            done = run_command(argv, cwd=where, timeout_s=timeout_s, env=env)
        except (OSError, OvernightError) as exc:  # not a program: no answer, never a crash
            return Installed(python, error=f"cannot start {python}: {exc}")
        if done.timed_out:
            return Installed(python, error=f"listing the plugins took over {timeout_s:g} s")
        try:
            with out.open("rb") as handle:
                answer = json.loads(handle.read(_MAX_ANSWER))
        except (OSError, ValueError):
            tail = done.output.strip().splitlines()[-1:] or [f"exit {done.exit_code}"]
            return Installed(python, error=f"{python} did not list its plugins: {tail[0]}")
    return _read_answer(python, answer)


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _read_answer(python: str, answer: Any) -> Installed:
    if not isinstance(answer, dict):
        return Installed(python, error="the plugin list was not a JSON object")
    plugins: dict[str, Plugin] = {}
    found = answer.get("plugins")
    for name, entry in (found if isinstance(found, dict) else {}).items():
        if not isinstance(entry, dict):
            continue
        plugins[str(name)] = Plugin(
            name=str(name),
            dist=str(entry.get("dist") or ""),
            module=str(entry.get("module") or ""),
            options=_strings(entry.get("options")),
            ini=_strings(entry.get("ini")),
            markers=_strings(entry.get("markers")),
            fixtures=_strings(entry.get("fixtures")),
            error=str(entry.get("error") or ""),
        )
    return Installed(python, plugins, str(answer.get("error") or ""))


@dataclass(frozen=True)
class PytestConfig:
    """The project's pytest configuration: the file pytest chooses, its ``addopts`` words and
    the keys it sets."""

    file: str | None = None
    addopts: tuple[str, ...] = ()
    ini: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    """``required_plugins``: distributions, each perhaps with a version requirement."""


def _ini_section(path: Path, section: str) -> dict[str, str] | None:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys as written
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError, OSError):
        return None
    if not parser.has_section(section):
        return None
    return dict(parser.items(section))


def _toml(path: Path) -> dict[str, Any] | None:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _found_config(root: Path) -> tuple[str, Mapping[str, Any]] | None:
    """The first file of pytest's precedence order that holds pytest configuration, with its
    table: ``pytest.toml``, ``.pytest.toml``, ``pytest.ini``, ``.pytest.ini`` (chosen even
    when empty), ``pyproject.toml`` ([tool.pytest] or [tool.pytest.ini_options]), ``tox.ini``
    ([pytest]), ``setup.cfg`` ([tool:pytest])."""
    for name in ("pytest.toml", ".pytest.toml"):
        if (root / name).is_file():
            table = (_toml(root / name) or {}).get("pytest")
            return f"{name} [pytest]", table if isinstance(table, dict) else {}
    for name in ("pytest.ini", ".pytest.ini"):
        if (root / name).is_file():
            return name, _ini_section(root / name, "pytest") or {}
    if (root / "pyproject.toml").is_file():
        tool = (_toml(root / "pyproject.toml") or {}).get("tool", {})
        table = tool.get("pytest") if isinstance(tool, dict) else None
        if isinstance(table, dict):
            native = {k: v for k, v in table.items() if k != "ini_options"}
            if native:
                return "pyproject.toml [tool.pytest]", native
            options = table.get("ini_options")
            if isinstance(options, dict):
                return "pyproject.toml [tool.pytest.ini_options]", options
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        if (root / name).is_file():
            found = _ini_section(root / name, section)
            if found is not None:
                return f"{name} [{section}]", found
    return None


def read_config(root: Path) -> PytestConfig:
    """The pytest configuration of the project at ``root`` (see ``_found_config``): its
    ``addopts`` (a string shell-split, a list as its words) and the keys it sets."""
    found = _found_config(root)
    if found is None:
        return PytestConfig()
    name, table = found
    addopts = table.get("addopts")
    words: list[str] = []
    if isinstance(addopts, str):
        try:
            words = shlex.split(addopts)
        except ValueError:
            words = addopts.split()
    elif isinstance(addopts, list):
        words = [str(w) for w in addopts]
    required = table.get("required_plugins")
    needed = required.split() if isinstance(required, str) else _strings(required)
    keys = tuple(str(k) for k in table if k not in ("addopts", "required_plugins"))
    return PytestConfig(name, tuple(words), keys, tuple(needed))


def names_options(config: PytestConfig, command: str) -> bool:
    """Whether ``config`` or ``command`` names anything a plugin could provide: without, the
    finder need not run."""
    return bool(
        config.addopts
        or config.ini
        or config.required
        or option_words(pytest_arguments(command))[0]
    )


def _command_words(command: str) -> list[str]:
    """``command``'s words from its program on (``VAR=value`` and ``env`` prefixes off)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]
    if words and posixpath.basename(words[0]) == "env":
        words = [w for w in words[1:] if "=" not in w]
    return words


def pytest_arguments(command: str) -> list[str]:
    """The words ``command`` hands pytest (after ``pytest`` or ``python -m pytest``)."""
    words = _command_words(command)
    if not words:
        return []
    if posixpath.basename(words[0]) in ("pytest", "py.test"):
        return words[1:]
    if len(words) >= 3 and words[1] == "-m" and words[2] in ("pytest", "py.test"):
        return words[3:]
    return []


def option_words(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """The options among ``words`` (``--cov=pkg`` as ``--cov``; a short one as written, such
    as ``-n4``) and the plugins they load by name (``-p name``)."""
    options: list[str] = []
    named: list[str] = []
    rest = iter(words)
    for word in rest:
        if word == "--":
            break
        if word == "-p":
            named.append(next(rest, ""))
        elif word.startswith("-p") and not word.startswith("--"):
            named.append(word[2:])
        elif word.startswith("--"):
            options.append(word.split("=", 1)[0])
        elif word.startswith("-") and len(word) > 1:
            options.append(word)
    return options, [n for n in named if n]


@dataclass(frozen=True)
class Failed:
    """What pytest's own output says it did not know."""

    options: tuple[str, ...] = ()
    ini: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()
    fixtures: tuple[str, ...] = ()
    async_tests: bool = False
    """Tests were ``async def`` and no plugin ran them."""

    def __bool__(self) -> bool:
        return bool(self.options or self.ini or self.markers or self.fixtures or self.async_tests)


_UNRECOGNIZED = re.compile(r"error: unrecognized arguments: ([^\n]*)")
_UNKNOWN_INI = re.compile(r"Unknown config option: ([A-Za-z0-9_.-]+)")
_UNKNOWN_MARK = re.compile(
    r"Unknown pytest\.mark\.([A-Za-z0-9_]+)|'([A-Za-z0-9_]+)' not found in `markers` config"
)
_NO_FIXTURE = re.compile(r"fixture '([A-Za-z0-9_]+)' not found")
_ASYNC = "async def functions are not natively supported"


def failed_names(output: str) -> Failed:
    """The names pytest's output says it did not know: options of a usage error
    (``unrecognized arguments: --cov=pkg``), ini keys (``Unknown config option:
    asyncio_mode``, a warning unless ``--strict-config``), markers (``Unknown
    pytest.mark.asyncio``, or ``'asyncio' not found in `markers` ...`` with
    ``--strict-markers``), fixtures not found, and ``async def`` tests no plugin ran."""
    options: list[str] = []
    for found in _UNRECOGNIZED.finditer(output):
        options += option_words(found.group(1).split())[0]
    marks = [a or b for a, b in _UNKNOWN_MARK.findall(output)]
    return Failed(
        options=tuple(dict.fromkeys(options)),
        ini=tuple(dict.fromkeys(_UNKNOWN_INI.findall(output))),
        markers=tuple(dict.fromkeys(marks)),
        fixtures=tuple(dict.fromkeys(_NO_FIXTURE.findall(output))),
        async_tests=_ASYNC in output,
    )


def known_dist(name: str) -> str | None:
    """The distribution ``KNOWN`` names for ``name`` (exactly, or by a prefix)."""
    if name in KNOWN:
        return KNOWN[name]
    prefixes = [p for p in KNOWN if p.endswith(("-", "_")) and name.startswith(p)]
    return KNOWN[max(prefixes, key=len)] if prefixes else None


@dataclass(frozen=True)
class Need:
    """An installed plugin that did not load, and what the project uses of it."""

    plugin: Plugin
    uses: tuple[str, ...]

    def said(self) -> str:
        return f"{self.plugin.named()} for {', '.join(self.uses)}"


@dataclass(frozen=True)
class Missing:
    """A name no installed plugin provides, and the distribution known to provide it."""

    name: str
    dist: str | None = None
    in_config: bool = True
    """An option or key (of the configuration or the command), not a marker or fixture."""


@dataclass(frozen=True)
class Advice:
    """The plugins to load, and the names no installed plugin provides."""

    installed: Installed
    loaded: tuple[str, ...] = ()
    """``[predicate] pytest_plugins`` as the spec has it."""
    needs: tuple[Need, ...] = ()
    missing: tuple[Missing, ...] = ()
    """Names pytest did not know (or that the configuration sets, of a well-known plugin)
    that no installed plugin provides."""
    async_plugins: tuple[Plugin, ...] = ()
    """Async tests no plugin ran, and nothing else named the plugin: the installed plugins
    that run them, one of which the tests need."""

    def __bool__(self) -> bool:
        return bool(self.needs or self.missing or self.async_plugins)

    def plugins(self) -> list[str]:
        """``pytest_plugins`` as it should be: the spec's, then each plugin needed (the only
        async plugin installed, when the tests are async and nothing else named one)."""
        names = [*self.loaded, *(n.plugin.name for n in self.needs)]
        if len(self.async_plugins) == 1:
            names.append(self.async_plugins[0].name)
        return list(dict.fromkeys(names))

    def adds(self) -> bool:
        """Whether ``plugins`` adds a plugin to the spec's."""
        return len(self.plugins()) > len(set(self.loaded))

    def line(self) -> str:
        """The exact line to put in the spec."""
        return f"[predicate] pytest_plugins = {toml_list(self.plugins())}"

    def said(self) -> str:
        """The plugins named with what the project uses of each, and what is missing."""
        parts = []
        if self.needs:
            parts.append(
                "the harness runs pytest with plugin autoload off, and the project uses "
                "installed plugins that did not load: " + "; ".join(n.said() for n in self.needs)
            )
        if self.async_plugins:
            parts.append(
                "its async tests ran under no plugin (async def functions are not natively "
                "supported); installed plugins that run them: "
                + ", ".join(p.named() for p in self.async_plugins)
            )
        if self.missing:
            parts.append(self.missing_said())
        return "; ".join(parts)

    def missing_said(self) -> str:
        names = ", ".join(m.name for m in self.missing)
        known = [f"{m.name} is {m.dist}'s" for m in self.missing if m.dist]
        hint = f" ({', '.join(known)})" if known else ""
        if self.installed.error:
            hint += f"; the harness could not list the installed plugins: {self.installed.error}"
        return f"no installed pytest plugin of {self.installed.python} provides {names}{hint}"

    def fix(self) -> str:
        """How to make the predicate start."""
        add = self.line() if self.adds() else ""
        if self.missing:
            names = ", ".join(m.name for m in self.missing)
            known = [f"{m.dist} for {m.name}" for m in self.missing if m.dist]
            which = f" ({', '.join(known)})" if known else ""
            written = ", ".join(m.name for m in self.missing if m.in_config)
            instead = f", or take {written} out of the command and configuration" if written else ""
            then = f"; for the plugins found installed: {add}" if add else ""
            return (
                f"install the plugin that provides each in {self.installed.python}{which} and "
                "list it in [predicate] pytest_plugins (autoload is off: only the plugins "
                f"listed there load){instead}{then}"
            )
        if add:
            return f"add this line to the spec, since only the plugins it lists load: {add}"
        names = ", ".join(p.name for p in self.async_plugins)
        return f"list the one the tests use ({names}) in [predicate] pytest_plugins"


def toml_list(names: Iterable[str]) -> str:
    """``names`` as a TOML array of strings."""
    return "[" + ", ".join(json.dumps(n) for n in names) + "]"


def _loaded(plugin: Plugin, names: Iterable[str]) -> bool:
    wanted = set(names)
    return plugin.name in wanted or (bool(plugin.module) and plugin.module in wanted)


def _provides(plugin: Plugin, kind: str, name: str) -> bool:
    if kind == "option":
        short = not name.startswith("--") and len(name) > 2  # -n4: the option -n, its value 4
        return name in plugin.options or (short and name[:2] in plugin.options)
    if kind == "ini":
        return name in plugin.ini
    if kind == "marker":
        return name in plugin.markers
    if kind == "fixture":
        return name in plugin.fixtures
    return _dist_key(name) == _dist_key(plugin.dist)  # "required": a distribution


def _dist_key(name: str) -> str:
    # A distribution's name as pip compares them, its version requirement cut off.
    bare = re.split(r"[<>=!~;\[ ]", name.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", bare).lower()


def advise(
    installed: Installed,
    config: PytestConfig,
    command: str,
    failed: Failed | None = None,
    loaded: Sequence[str] = (),
) -> Advice:
    """The installed plugins that provide what the configuration (its ``addopts``, keys and
    ``required_plugins``), the command's own options and ``failed`` (pytest's output) name,
    those already loaded left out (``loaded``: the spec's ``pytest_plugins``; ``-p`` in the
    command or ``addopts``); and what was named that none provides: every option or key
    pytest said it did not know, and any name that ``KNOWN`` gives to a plugin."""
    failed = failed or Failed()
    config_options, config_named = option_words(config.addopts)
    command_options, command_named = option_words(pytest_arguments(command))
    on = [*loaded, *config_named, *command_named]
    off = {n.removeprefix("no:") for n in on if n.startswith("no:")}
    wanted: list[tuple[str, str, bool]] = []  # (kind, name, pytest said it did not know it)
    wanted += [("option", o, o in failed.options) for o in [*config_options, *command_options]]
    wanted += [("option", o, True) for o in failed.options]
    wanted += [("ini", k, k in failed.ini) for k in config.ini]
    wanted += [("ini", k, True) for k in failed.ini]
    wanted += [("marker", m, True) for m in failed.markers]
    wanted += [("fixture", f, True) for f in failed.fixtures]
    wanted += [("required", r, True) for r in config.required]
    plugins = sorted(installed.plugins.values(), key=lambda p: p.name)
    uses: dict[str, list[str]] = {}
    missing: list[Missing] = []
    seen: set[tuple[str, str]] = set()
    for kind, name, unknown in wanted:
        if (kind, name) in seen:
            continue
        seen.add((kind, name))
        providers = [p for p in plugins if _provides(p, kind, name)]
        label = name if kind in ("option", "ini") else f"the {kind} {name}"
        if kind == "required":
            label = f"required_plugins {name}"
        if any(_loaded(p, on) for p in providers):
            continue
        usable = [p for p in providers if p.name not in off]
        if usable:
            # two plugins that define one option cannot both load: the first is named
            uses.setdefault(usable[0].name, []).append(label)
        elif not providers:
            dist = name if kind == "required" else known_dist(name)
            if (unknown and kind in ("option", "ini", "required")) or dist is not None:
                missing.append(Missing(label, dist, kind in ("option", "ini", "required")))
    # in the order the project names them: the addopts first
    needs = tuple(Need(installed.plugins[n], tuple(u)) for n, u in uses.items())
    async_plugins: tuple[Plugin, ...] = ()
    if failed.async_tests and not any(n.plugin.dist in ASYNC_DISTS for n in needs):
        async_plugins = tuple(
            p for p in plugins if p.dist in ASYNC_DISTS and not _loaded(p, on) and p.name not in off
        )
    return Advice(installed, tuple(loaded), needs, tuple(missing), async_plugins)
