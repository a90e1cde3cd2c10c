"""``overnight replay``: a recorded night run again, offline, against a copy of its workspace
at the run's base commit, with a model that answers from the recording.

It reports the first place the replay differs from the recording (a request, a tool result
inside one, an extra call, a task's verdict), with the recorded and replayed text around it,
and how many of the recorded calls the replay asked alike; otherwise that it ended the same:
the same ending, the same verified tasks and the same tree on the branch. Past a divergence
it goes on answering from the recording by position (``overnight.replay.model``).

Before anything is copied or run, the machine is checked for what the recorded night used
(``check_machine``): a missing program is a ``ConfigError`` naming it and how to install it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from overnight import api
from overnight.config.spec import Spec
from overnight.core.errors import ConfigError
from overnight.demo import prepare_example
from overnight.night import git
from overnight.night.preflight import check_command_programs, check_programs, check_sandbox_programs
from overnight.night.resolve import resolve
from overnight.replay.model import Divergence, ReplayModel
from overnight.store.answer_log import ANSWERS_FILE, PLACED_SINCE, placeholders
from overnight.store.journal import read_intact_records
from overnight.store.rundir import RunDir, read_json

SHIPPED = "textstats"
EXPECTED = "expected.json"


@dataclass(frozen=True)
class Recording:
    """What a replay needs of a recorded night."""

    name: str
    spec: dict[str, Any]
    answers: list[dict[str, Any]]
    stop_reason: str
    verified: list[str]
    verdicts: list[list[str]]
    """Each task event but its start, in order: task, event, outcome."""
    tree: str | None
    """The tree of the branch's head; None when the workspace holding it is gone."""
    workspace: str | None = None
    base_commit: str | None = None
    example: str | None = None
    """A bundled example to copy in place of a workspace (the shipped recording)."""
    base_tree: str | None = None
    """The tree of the base commit: a copy whose tree differs did not start from the same
    files."""


def verdicts_of(trace: Path) -> list[list[str]]:
    return [
        [str(e.get("task")), str(e.get("event")), str(e.get("outcome", ""))]
        for e in read_intact_records(trace)
        if e.get("kind") == "task" and e.get("event") != "started"
    ]


def answers_of(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_intact_records(path) if r.get("kind") == "answer"]


def recording_of_run(path: Path) -> Recording:
    rd = RunDir(path)
    answers = answers_of(rd.path / ANSWERS_FILE)
    if not rd.result.exists():
        raise ConfigError("RUN", f"{path} has no result.json yet", "replay a run that has ended")
    result = read_json(rd.result)
    if not answers and result.get("spend", {}).get("model_calls"):
        raise ConfigError(
            "RUN",
            f"{path} recorded no model answers ({ANSWERS_FILE})",
            "replay a run made since runs record their answers",
        )
    branch = result.get("branch") or {}
    workspace = str(read_json(rd.manifest).get("workspace") or "")
    head = branch.get("head")
    tree = (
        git.answer(Path(workspace), "rev-parse", f"{head}^{{tree}}") if workspace and head else None
    )
    return Recording(
        name=str(result.get("run_id") or path.name),
        spec=read_json(rd.spec),
        answers=answers,
        stop_reason=str(result.get("stop_reason")),
        verified=[str(v.get("id")) for v in result.get("verified") or []],
        verdicts=verdicts_of(rd.trace),
        tree=tree,
        workspace=workspace or None,
        base_commit=branch.get("base_commit"),
        base_tree=git.answer(Path(workspace), "rev-parse", f"{branch.get('base_commit')}^{{tree}}")
        if workspace and branch.get("base_commit")
        else None,
    )


def save_recording(run: Path, target: Path, example: str) -> None:
    """Keep a recorded night of a bundled example as a package resource: its spec, its
    answers and what it ended with."""
    rec = recording_of_run(run)
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run / ANSWERS_FILE, target / ANSWERS_FILE)
    expected = {
        "kind": "recorded_night",
        "version": 1,
        "name": rec.name,
        "example": example,
        "spec": {**rec.spec, "base_dir": ""},  # the replay's own copy is its workspace
        "stop_reason": rec.stop_reason,
        "verified": rec.verified,
        "verdicts": rec.verdicts,
        "tree": rec.tree,
        "base_tree": rec.base_tree,
    }
    (target / EXPECTED).write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


def shipped_recording(name: str = SHIPPED) -> Recording:
    """The recorded demo night shipped with the package."""
    folder = resources.files("overnight.replay").joinpath("recordings", name)
    with resources.as_file(folder) as where:
        data = json.loads((where / EXPECTED).read_text())
        answers = answers_of(where / ANSWERS_FILE)
    return Recording(
        name=f"{data['name']} (shipped)",
        spec=data["spec"],
        answers=answers,
        stop_reason=data["stop_reason"],
        verified=data["verified"],
        verdicts=data["verdicts"],
        tree=data["tree"],
        example=data["example"],
        base_tree=data.get("base_tree"),
    )


@dataclass(frozen=True)
class ReplayReport:
    kind: str
    version: int
    recording: str
    run_dir: str
    same: bool
    divergence: Divergence | None
    stop_reason: tuple[str, str]
    verified: tuple[list[str], list[str]]
    tree: tuple[str | None, str | None]
    calls: tuple[int, int]
    """Answers recorded, and calls the replay had answered from them."""
    notes: tuple[str, ...] = ()
    matched: int = 0
    """Calls whose request was the recorded one at their position."""
    made: int = 0
    """Calls the replay made."""
    stopped: str | None = None
    """Why the replay could answer no further, when it could not."""

    @property
    def calls_matched(self) -> str:
        """``N of M``: calls asked as recorded, of the calls recorded."""
        return f"{self.matched} of {self.calls[0]}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "calls_matched": self.calls_matched}

    @property
    def exit_code(self) -> int:
        return 0 if self.same else 3


def _format_note(rec: Recording) -> tuple[str, ...]:
    """A note when the recording's answers are of a format recorded before the run's paths
    were written alike before a cut: its requests may hold what the harness no longer asks."""
    versions = {int(a.get("version") or 1) for a in rec.answers}
    if not versions or min(versions) >= PLACED_SINCE:
        return ()
    return (
        f"the recording's answers are of format {min(versions)}, recorded by an older "
        "overnight that showed the model the run's own paths (and cut output after them); "
        "a request holding such output now names them relative or as placeholders and is "
        "reported as differing: record the night again to compare it call by call",
    )


def _workspace(rec: Recording, into: Path) -> Path:
    copy = into.absolute() / "workspace"
    if rec.example is not None:
        made = prepare_example(into, rec.example)
        if made != copy:
            made.rename(copy)
        return copy
    if rec.workspace is None or rec.base_commit is None:
        raise ConfigError("RUN", "the run records no workspace or base commit", "")
    copy.parent.mkdir(parents=True, exist_ok=True)
    # A clone of the user's own repository by its path: the one transport this git allows.
    clone = ["-c", "protocol.file.allow=always", "clone", "-q", "--no-hardlinks"]
    done = git.raw([*clone, rec.workspace, str(copy)], cwd=copy.parent)
    if done.returncode != 0 or git.answer(copy, "reset", "-q", "--hard", rec.base_commit) is None:
        raise ConfigError(
            "RUN",
            f"the workspace {rec.workspace} at the run's base commit {rec.base_commit} cannot "
            f"be copied: {git.text(done.stderr).strip()[:300]}",
            "replay on the machine, and with the repository, the run was made on",
        )
    return copy


def replay_spec(rec: Recording, copy: Path) -> Spec:
    """The recorded spec, its workspace the copy at ``copy``."""
    return Spec.model_validate({**rec.spec, "base_dir": str(copy), "workspace": "."})


def check_machine(spec: Spec, copy: Path | None = None) -> None:
    """What the recorded night used is on this machine, or a ``ConfigError`` naming what is
    missing and how to install it: the programs of its tools (ripgrep behind ``search_text``,
    each ``[tools] commands`` program), bubblewrap when the sandbox is on, and the program of
    the goal predicate, its set-up and each task's verify and command (on PATH; one named by
    a path, in the copy of the workspace, once there is one)."""
    check_programs(spec)
    check_sandbox_programs(spec)
    check_command_programs(spec, copy)


def _first_verdict_difference(old: list[list[str]], new: list[list[str]]) -> Divergence | None:
    for i in range(max(len(old), len(new))):
        a = old[i] if i < len(old) else None
        b = new[i] if i < len(new) else None
        if a != b:
            return Divergence(i + 1, "verify", "verdict", f"task event {i + 1}: was {a}, now {b}")
    return None


def replay(rec: Recording, into: Path | None = None) -> ReplayReport:
    """Run the recorded night again in ``into`` (a new or empty directory)."""
    if into is not None and into.exists() and any(into.iterdir()):
        raise ConfigError("--into", f"{into} is not empty", "pass a new or empty directory")
    # before anything is copied or run: what the recorded night used is here
    check_machine(replay_spec(rec, (into or Path(tempfile.gettempdir())) / "workspace"))
    base = into or Path(tempfile.mkdtemp(prefix="overnight-replay-"))
    base.mkdir(parents=True, exist_ok=True)
    copy = _workspace(rec, base)
    spec = replay_spec(rec, copy)
    check_command_programs(spec, copy)
    run_dir = base.absolute() / "run"

    def names() -> list[tuple[str, str]]:
        manifest = read_json(run_dir / "run.json")
        return placeholders(run_dir, copy, str(manifest["run_id"]), str(manifest["branch"]))

    model = ReplayModel(rec.answers, names)
    night = resolve(spec, run_dir, model=model)
    night.model_source = "replay"  # never a night `overnight estimate` learns from
    result = api.run(night)
    head = result.branch.head
    tree = git.answer(copy, "rev-parse", f"{head}^{{tree}}") if head else None
    verified = [v.id for v in result.verified]
    divergence = model.divergence
    if divergence is None and model.calls < len(rec.answers):
        divergence = Divergence(
            model.calls + 1,
            str(rec.answers[model.calls].get("purpose")),
            "request",
            f"the replay made {model.calls} calls; the recording has {len(rec.answers)}",
        )
    if divergence is None:
        divergence = _first_verdict_difference(rec.verdicts, verdicts_of(run_dir / "trace.jsonl"))
    same = (
        divergence is None
        and result.stop_reason == rec.stop_reason
        and verified == rec.verified
        and (rec.tree is None or tree == rec.tree)
    )
    start = git.answer(copy, "rev-parse", "HEAD^{tree}")
    changed = rec.base_tree is not None and start != rec.base_tree
    notes = (
        "the workspace copy does not start from the recorded base tree: its files differ "
        "(for the shipped recording, the bundled example changed: `python -m overnight.replay` "
        "records it again)",
    ) * changed + _format_note(rec)
    return ReplayReport(
        notes=notes,
        kind="replay",
        version=2,
        recording=rec.name,
        run_dir=str(run_dir),
        same=same,
        divergence=divergence,
        stop_reason=(rec.stop_reason, str(result.stop_reason)),
        verified=(rec.verified, verified),
        tree=(rec.tree, tree),
        calls=(len(rec.answers), model.answered),
        matched=model.matched,
        made=model.calls,
        stopped=model.stopped,
    )


def render_replay(r: ReplayReport) -> str:
    lines = [f"Replay of {r.recording} in {r.run_dir}:"]
    if r.divergence is not None:
        d = r.divergence
        lines.append(f"  DIVERGED at call {d.call} ({d.purpose}, {d.kind}): {d.detail}")
        if d.recorded or d.replayed:
            lines += [f"    recorded: {d.recorded}", f"    replayed: {d.replayed}"]
    if r.stopped is not None:
        lines.append(f"  stopped:  the recording could answer no further: {r.stopped}")
    elif (
        r.divergence is not None
        and r.divergence.kind != "verdict"
        and r.calls[1] >= r.divergence.call
    ):
        lines.append("  went on:  past the divergence, each call answered by its position")
    lines += [
        f"  ending:   recorded {r.stop_reason[0]}, replayed {r.stop_reason[1]}",
        f"  verified: recorded {', '.join(r.verified[0]) or 'none'}; "
        f"replayed {', '.join(r.verified[1]) or 'none'}",
        f"  tree:     recorded {r.tree[0] or 'unknown (its workspace is gone)'}, "
        f"replayed {r.tree[1] or 'none'}",
        f"  calls:    {r.calls_matched} calls matched ({r.calls[0]} recorded; the replay made "
        f"{r.made}, {r.calls[1]} answered from the recording)",
        *(f"  note: {n}" for n in r.notes),
        f"SAME: the replay ended as the recorded night did; {r.calls_matched} calls matched."
        if r.same
        else f"DIFFERENT: the replay did not end as the recorded night did; {r.calls_matched} "
        "calls matched.",
    ]
    return "\n".join(lines) + "\n"
