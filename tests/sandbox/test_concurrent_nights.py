"""Two nights at once on one machine, as a fleet worker runs them (threads of one process):
one night's fork bomb, capped by ``[sandbox] processes``, holds every process its limit
allows while the other night's correct fix is verified by a command that starts several. With
a uid per night the fix lands; forced onto one shared uid (the design before), its verify
cannot fork and the fix is parked. Real git, real bubblewrap, command tasks (no model)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from overnight.report.facts import sandbox_line
from overnight.sandbox.uids import RANGE_ENV
from overnight.store.result import TerminalResult
from tests.helpers.bomb import BOMB, FORKS, release, wait_until_full
from tests.helpers.nights import command_task, git, make_repo, make_spec, run_night
from tests.helpers.project import calc_repo
from tests.helpers.sandbox import bwrap

pytestmark = [
    pytest.mark.usefixtures("bwrap"),
    pytest.mark.skipif(os.geteuid() != 0, reason="only a root harness gives nights uids"),
]
__all__ = ["bwrap"]

PROCESSES = 64
SANDBOX = {"mode": "on", "processes": PROCESSES}
PYTEST = "python3 -m pytest -q -p no:cacheprovider"


def two_nights(tmp_path: Path) -> tuple[TerminalResult, TerminalResult, int]:
    """The bomb's night started first and left holding its processes; the fix's night run
    from start to end meanwhile. Returns both results and how many children the bomb made."""
    bombed = make_repo(tmp_path / "bombed", {"bomb.py": BOMB})
    bomb_spec = make_spec(
        bombed,
        predicate="test -f bomb-full",
        tasks=[command_task("bomb", "python3 bomb.py", "test -f bomb-full", timeout_s=180)],
        model=False,
        sandbox=SANDBOX,
    )
    fixed = calc_repo(tmp_path / "fixed")
    # The predicate and the fix itself start no process of their own (``exec``: the shell
    # forks none), so that only the verify needs more than the one process it runs in.
    fix_spec = make_spec(
        fixed,
        predicate=f"exec {PYTEST}",
        tasks=[
            command_task("fix", "exec sed -i 's/a - b/a + b/' calc/ops.py", f"{FORKS} && {PYTEST}")
        ],
        model=False,
        sandbox=SANDBOX,
    )
    bomb_run = tmp_path / "bomb-run"
    results: dict[str, TerminalResult] = {}

    def bomb_night() -> None:
        results["bomb"] = run_night(bomb_spec, bomb_run)[1]

    thread = threading.Thread(target=bomb_night, name="night-bomb")
    thread.start()
    try:
        children = wait_until_full(bomb_run / "worktree", timeout_s=120)
        results["fix"] = run_night(fix_spec, tmp_path / "fix-run")[1]
    finally:
        (bomb_run / "worktree").mkdir(parents=True, exist_ok=True)
        release(bomb_run / "worktree")
        thread.join(timeout=240)
    assert not thread.is_alive()
    return results["bomb"], results["fix"], children


def test_a_fork_bomb_in_one_night_leaves_the_other_nights_fix_to_land(tmp_path: Path) -> None:
    bomb, fix, children = two_nights(tmp_path)
    assert children < PROCESSES  # the bomb met its own limit
    assert fix.stop_reason == "GOAL_MET", fix.plan
    [landed] = fix.verified
    assert landed.id == "fix" and landed.commit is not None
    fixed = tmp_path / "fixed"
    assert "a + b" in git(fixed, "show", f"{landed.commit}:calc/ops.py")
    assert git(fixed, "rev-parse", fix.branch.name) == fix.branch.head
    assert bomb.sandbox is not None and fix.sandbox is not None
    assert bomb.sandbox.uid != fix.sandbox.uid
    for sb in (bomb.sandbox, fix.sandbox):
        assert sb.process_limit == f"per night: uid {sb.uid} of its own (RLIMIT_NPROC 64)"
    assert f"Process limit: per night: uid {fix.sandbox.uid} of its own" in sandbox_line(fix)


def test_forced_onto_one_shared_uid_the_bomb_fails_the_other_nights_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The design before: every sandbox of the machine one uid (here a range of one, so the
    second night falls back to sharing it), so one process limit for both nights."""
    monkeypatch.setenv(RANGE_ENV, "61201")
    bomb, fix, children = two_nights(tmp_path)
    assert children < PROCESSES
    assert fix.stop_reason != "GOAL_MET" and fix.verified == []
    [parked] = fix.plan.parked
    assert parked.id == "fix" and "verify" in parked.reason, parked
    assert "Cannot fork" in parked.detail, parked  # the fix was right: its verify could not run
    assert bomb.sandbox is not None and fix.sandbox is not None
    assert bomb.sandbox.uid == fix.sandbox.uid == 61201
    assert bomb.sandbox.process_limit.startswith("per night: uid 61201")
    assert fix.sandbox.process_limit.startswith("shared: uid 61201, with other sandboxes")
    assert "every uid of the range is held by another sandbox" in sandbox_line(fix)
