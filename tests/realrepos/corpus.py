"""The real-repository corpus: released sdists of small pure-Python packages, pinned by version
and sha256, each with one real bug to inject into one function.

The sdists are fetched once, with pip from the package registry (hashes required), into a
cache directory: ``$OVERNIGHT_CORPUS`` or ``.cache/corpus`` at the top of the repository.
``python -m tests.realrepos.corpus`` fills it (``scripts/setup --dev`` and ``.ci/run`` call
it); a test finding the cache empty tries once itself and skips, naming the reason, only
when the registry cannot be reached.

To add a package: pick a pure-Python sdist with no runtime dependencies whose tests run with
pytest alone, add a ``Package`` below (its sha256 is the one the registry lists for the
sdist), choose one function, a one-line bug its tests catch, a wrong fix they also catch,
and a test file to forge; run ``python -m tests.realrepos.corpus`` and the corpus tests.

``TARGETED`` packages are judged by the few tests that reach the bug. ``WHOLE_SUITES`` are
judged by the whole suite as released, with ``-x``: tests that skip in their body when an
optional module is missing, skips for another platform, unittest-style skips, and (for the
``-addopts`` entries) the ``-x`` coming from the project's own pytest configuration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    sha256: str
    layout: str
    #: the file holding the function the bug goes into, relative to the sdist's top
    source: str
    #: the released text of the function's line(s), the injected bug, and a wrong fix
    good: str
    bad: str
    wrong: str
    #: the test command: the goal predicate and the task's verify
    tests: str
    #: a test file the forging agent edits
    test_file: str
    #: build steps an agent may run (each allowed by the night's `[tools] commands`)
    build: tuple[str, ...]
    #: a project config file and text added to it before the base commit: its section header
    #: on the first line, then the keys (merged into that section when the file has it)
    config: tuple[str, str] | None = None
    #: the test id, when the package appears more than once in the corpus
    label: str = ""
    #: what a clean checkout needs before its tests run (the night's `[predicate] setup`)
    setup: str | None = None
    #: the pytest plugins the suite's own configuration needs (`[predicate] pytest_plugins`)
    plugins: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.label or self.name

    @property
    def sdist(self) -> str:
        return f"{self.name}-{self.version}.tar.gz"

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


TARGETED: tuple[Package, ...] = (
    Package(
        name="six",
        version="1.16.0",
        sha256="1e61c37477a1626458e36f7b1d82aa5c9b094fa4802892072e49de9c60c4c926",
        layout="single module, tests beside it, a tracked six.egg-info",
        source="six.py",
        good="    def itervalues(d, **kw):\n        return iter(d.values(**kw))\n",
        bad="    def itervalues(d, **kw):\n        return iter(d.keys(**kw))\n",
        wrong="    def itervalues(d, **kw):\n        return iter(d.items(**kw))\n",
        tests="python -m pytest -q test_six.py -k dictionary",
        test_file="test_six.py",
        build=("python setup.py -q build", "python setup.py -q egg_info"),
    ),
    Package(
        name="toolz",
        version="0.12.1",
        sha256="ecca342664893f177a13dac0e6b41cbd8ac25a358e5f215316d43e2100224f4d",
        layout="flat package, tests inside the package, a tracked toolz.egg-info",
        source="toolz/itertoolz.py",
        good="    for item in seq:\n        d[item] += 1\n    return dict(d)\n",
        bad="    for item in seq:\n        d[item] = 1\n    return dict(d)\n",
        wrong="    for item in seq:\n        d[item] += 2\n    return dict(d)\n",
        tests="python -m pytest -q toolz/tests/test_itertoolz.py",
        test_file="toolz/tests/test_itertoolz.py",
        build=("python setup.py -q build", "python setup.py -q egg_info"),
    ),
    Package(
        name="more-itertools",
        version="10.2.0",
        sha256="8fccb480c43d3e99a00087634c06dd02b0d50fbf088b380de5a41a015ec239e1",
        layout="flat package, tests/ without a conftest",
        source="more_itertools/more.py",
        good="    deque(zip(iterable, counter), maxlen=0)\n    return next(counter)\n",
        bad="    deque(zip(iterable, counter), maxlen=0)\n    return next(counter) - 1\n",
        wrong="    deque(zip(iterable, counter), maxlen=0)\n    return next(counter) + 1\n",
        tests="python -m pytest -q tests/test_more.py -k ilen",
        test_file="tests/test_more.py",
        build=("python setup.py -q build",),
    ),
    Package(
        name="tomlkit",
        version="0.12.3",
        sha256="75baf5012d06501f07bee5bf8e801b9f343e7aac5a92581f20f80ce632e6b5a4",
        layout="flat package, tests/ with a conftest of fixtures",
        source="tomlkit/_utils.py",
        good='                if sign == "-":\n                    offset = -offset\n',
        bad='                if sign == "+":\n                    offset = -offset\n',
        wrong='                if sign == "+-":\n                    offset = -offset\n',
        tests="python -m pytest -q tests/test_utils.py",
        test_file="tests/test_utils.py",
        build=("python -m compileall -q tomlkit",),
    ),
    Package(
        name="cachetools",
        version="5.3.2",
        sha256="086ee420196f7b2ab9ca2db2520aca326318b68fe5ba8bc4d49cca91add450f2",
        layout="src layout, tests/ importing the package by name, a tracked egg-info",
        source="src/cachetools/keys.py",
        good="        return _HashedTuple(args + sum(sorted(kwargs.items()), _kwmark))\n",
        bad="        return _HashedTuple(args + sum(((v,) for _, v in sorted(kwargs.items())),"
        " _kwmark))\n",
        wrong="        return _HashedTuple(args + sum(((k,) for k, _ in sorted(kwargs.items())),"
        " _kwmark))\n",
        tests="python -m pytest -q tests/test_keys.py",
        test_file="tests/test_keys.py",
        build=("python setup.py -q build", "python setup.py -q egg_info"),
    ),
)


# The released suites, whole: each skips some of its tests where it runs here.
TABULATE = Package(
    name="tabulate",
    version="0.10.0",
    sha256="e2cfde8f79420f6deeffdeda9aaec3b6bc5abce947655d17ac662b126e48a60d",
    layout="flat package, test/ whose tests call pytest's skip() (imported through "
    "test/common.py) in the body when numpy, pandas or wcwidth is missing",
    source="tabulate/__init__.py",
    good='    fmt = "{0:^%ds}" % width\n',
    bad='    fmt = "{0:%ds}" % width\n',
    wrong='    fmt = "{0:>%ds}" % width\n',
    tests="python -m pytest -q -x",
    test_file="test/test_internal.py",
    # setuptools_scm builds need the network: a byte-compile is the build step offline
    build=("python -m compileall -q tabulate",),
)
SIX = Package(
    name="six",
    version="1.17.0",
    sha256="ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81",
    layout="single module, tests beside it, parametrized cases skipping for a missing "
    "dbm.gnu / dbm.ndbm, a setup.cfg with [tool:pytest]",
    source="six.py",
    good="            orig_vars['__qualname__'] = cls.__qualname__\n",
    bad="            orig_vars['__qualname__'] = cls.__name__\n",
    wrong="            orig_vars['__qualname__'] = cls.__module__ + '.' + cls.__qualname__\n",
    tests="python -m pytest -q -x",
    test_file="test_six.py",
    build=("python setup.py -q build", "python setup.py -q egg_info"),
    label="six-1.17",
)
COLORAMA = Package(
    name="colorama",
    version="0.4.6",
    sha256="08695f5cb7ed6e0531a20572697297273c47b8cae5a63ffc6d6ed5c201be6e44",
    layout="flat package, unittest-style tests inside it, skipUnless Windows or a tty",
    source="colorama/ansitowin32.py",
    good="                if command in 'JKm':\n                    params = (0,)\n",
    bad="                if command in 'JKm':\n                    params = (1,)\n",
    wrong="                if command in 'JKm':\n                    params = ()\n",
    tests="python -m pytest -q -x",
    test_file="colorama/tests/ansitowin32_test.py",
    build=("python -m compileall -q colorama",),
)

WHOLE_SUITES: tuple[Package, ...] = (
    TABULATE,
    SIX,
    COLORAMA,
    # The same suites with -x in the project's config, not on the command line: one each
    # of setup.cfg (into six's [tool:pytest]), pyproject.toml (a new table after tabulate's
    # own [tool.*] tables) and a new pytest.ini.
    replace(
        SIX,
        tests="python -m pytest -q",
        config=("setup.cfg", "[tool:pytest]\naddopts = -x\n"),
        label="six-1.17-addopts",
    ),
    replace(
        TABULATE,
        tests="python -m pytest -q",
        config=("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-x"\n'),
        label="tabulate-addopts",
    ),
    replace(
        COLORAMA,
        tests="python -m pytest -q",
        config=("pytest.ini", "[pytest]\naddopts = -x\n"),
        label="colorama-addopts",
    ),
)

# A generated file git ignores: a clean checkout cannot import the package until a set-up
# command writes it.
ISODATE = Package(
    name="isodate",
    version="0.7.2",
    sha256="4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
    layout="src layout, tests/, a setuptools-scm version.py that .gitignore lists",
    source="src/isodate/duration.py",
    good="        negduration = Duration(years=-self.years, months=-self.months)\n",
    bad="        negduration = Duration(years=self.years, months=-self.months)\n",
    wrong="        negduration = Duration(years=-self.years, months=self.months)\n",
    tests="python -m pytest -q -x",
    test_file="tests/test_duration.py",
    build=("python -m compileall -q src",),
    setup="python -c \"open('src/isodate/version.py', 'w').write('version = __version__ = "
    '\\"0.7.2\\"\\n\')"',
)

NEEDS_SETUP: tuple[Package, ...] = (ISODATE,)

# Classes of suite found on real packages: each judged by its whole suite as released.
DOCUTILS = Package(
    name="docutils",
    version="0.23.1",
    sha256="8a83ac8810e41228b6f20e96a183abd2460a1757f78e2603e3d4b31fe7d29622",
    layout="flat package, a unittest suite in test/ whose tests loop over cases with "
    "subTest: in test_include.py one subtest skips for a missing markdown parser (pycmark) "
    "while its siblings run, and the bug fails four of them",
    source="docutils/parsers/rst/directives/misc.py",
    good="                text = text[after_index + len(starttext):]\n",
    bad="                text = text[after_index:]\n",
    wrong="                text = text[after_index + 1:]\n",
    tests="python -m pytest -q -x",
    test_file="test/test_parsers/test_rst/test_directives/test_include.py",
    build=("python -m compileall -q docutils",),
)
# `--cov` and its report options in setup.cfg's addopts, `asyncio_mode` and tests marked
# for pytest-asyncio: the suite cannot start without both plugins.
ASYNC_TIMEOUT = Package(
    name="async_timeout",
    version="5.0.1",
    sha256="d9321a7a3d5a6a5e187e824d2fa0793ce379a202935782d555d6e9d2735677d3",
    layout="flat package, tests/, a setup.cfg whose [tool:pytest] addopts carries --cov "
    "options and asyncio_mode = strict, tests marked for pytest-asyncio",
    source="async_timeout/__init__.py",
    good="        deadline = loop.time() + delay  # type: Optional[float]\n",
    bad="        deadline = loop.time() - delay  # type: Optional[float]\n",
    wrong="        deadline = delay  # type: Optional[float]\n",
    tests="python -m pytest -q",
    test_file="tests/test_timeout.py",
    build=("python -m compileall -q async_timeout",),
    plugins=("pytest_cov", "asyncio"),
)

# A unittest suite whose own metaclass names each generated test method after its parameter:
# two cases over b"\r\n" * 5_000_000 have node ids of about 10 MB.
PYTHON_MULTIPART = Package(
    name="python_multipart",
    version="0.0.34",
    sha256="b998ae90ca6e1e363261ce2e0e230281b8af53867b757970abd69ee9edcd843a",
    layout="flat package, tests/ whose compat metaclass names unittest methods after their "
    "parameter: two test ids of 10,000,200 characters; the tests import yaml",
    source="python_multipart/multipart.py",
    good="                if c == CR or c == LF:\n",
    bad="                if c == CR and c == LF:\n",
    wrong="                if c == LF:\n",
    tests="python -m pytest -q -x",
    test_file="tests/test_multipart.py",
    build=("python -m compileall -q python_multipart",),
)

SUITE_CLASSES: tuple[Package, ...] = (DOCUTILS, PYTHON_MULTIPART, ASYNC_TIMEOUT)

PACKAGES: tuple[Package, ...] = TARGETED + WHOLE_SUITES + NEEDS_SETUP + SUITE_CLASSES


def cache_dir() -> Path:
    return Path(os.environ.get("OVERNIGHT_CORPUS") or ROOT / ".cache" / "corpus")


def missing(cache: Path | None = None) -> list[Package]:
    """The packages whose sdist is not in the cache, each sdist once."""
    cache = cache or cache_dir()
    sdists = {p.sdist: p for p in PACKAGES}
    return [p for sdist, p in sdists.items() if not (cache / sdist).is_file()]


def fetch(cache: Path | None = None) -> str:
    """Download the missing sdists with pip, every hash checked; return pip's error text, or
    an empty string when the cache is complete."""
    cache = cache or cache_dir()
    wanted = missing(cache)
    if not wanted:
        return ""
    cache.mkdir(parents=True, exist_ok=True)
    # pip resolves one requirements file as one set: two versions of a name conflict, so
    # each round asks for a name once.
    rounds: list[list[Package]] = []
    for package in wanted:
        free = [r for r in rounds if all(p.name != package.name for p in r)]
        if free:
            free[0].append(package)
        else:
            rounds.append([package])
    for number, batch in enumerate(rounds):
        requirements = cache / f"requirements{number or ''}.txt"
        requirements.write_text("".join(p.requirement + "\n" for p in batch))
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--require-hashes",
                "-r",
                str(requirements),
                "-d",
                str(cache),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            error = (proc.stderr or proc.stdout).strip()[-2000:]
            return error or f"pip exited {proc.returncode}"
    still = missing(cache)
    return f"not downloaded: {', '.join(p.sdist for p in still)}" if still else ""


def unpack(package: Package, into: Path, cache: Path | None = None) -> Path:
    """The sdist's files, as released, in ``into`` (its top directory stripped)."""
    cache = cache or cache_dir()
    top = f"{package.name}-{package.version}/"
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(cache / package.sdist) as archive:
        for member in archive.getmembers():
            if not member.name.startswith(top) or member.name == top.rstrip("/"):
                continue
            member.name = member.name[len(top) :]
            archive.extract(member, into, filter="data")
    return into


if __name__ == "__main__":
    error = fetch()
    if error:
        print(f"corpus: {error}", file=sys.stderr)
        sys.exit(1)
    print(f"corpus: {len({p.sdist for p in PACKAGES})} sdists in {cache_dir()}")
