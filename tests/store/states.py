"""A run state driven through every kind of change a night makes, one seeded step at a time:
the same seed gives the same states, in a test and in a child process it kills."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

from overnight.core.drift import DriftVerdict, drift_gate
from overnight.core.resume import VerifyOutcome
from overnight.core.state import PredicateRecord, RunState
from overnight.core.tasks import CommandRun, ParkedTask, Task
from overnight.store.run_state import RunStateStore


def task(n: int, rng: random.Random) -> Task:
    return Task(
        id=f"t{n}",
        title=f"task {n} — añadir ✓",
        command=f"echo {n} >> f.txt",
        verify="true",
        value=rng.choice([0.0, 0.0, 1.0, 2.5]),
    )


def fresh_state(tasks: int = 20, seed: int = 0) -> RunState:
    rng = random.Random(seed)
    return RunState(
        run_id="run-1",
        goal_text="finish every task",
        goal_sha="0" * 64,
        branch="overnight/run-1",
        base_commit="b" * 40,
        queue=[task(n, rng) for n in range(tasks)],
        budget={"usd": 1.0, "hours": 2.0},
    )


class Evolution:
    """Step ``i`` changes the state the way a night does (laps, plans, drift, lessons, effects,
    and now and then a list assigned or cut outside the state's methods), and sets
    ``seconds_used`` to ``i``: a loaded state says which step it is."""

    def __init__(self, seed: int, tasks: int = 20) -> None:
        self.rng = random.Random(seed)
        self.state = fresh_state(tasks, seed)
        self.next_id = tasks

    def step(self, i: int) -> None:
        s, rng = self.state, self.rng
        roll = rng.random()
        if roll < 0.55 and s.queue:
            self.lap(i)
        elif roll < 0.65 or not s.queue:
            added = [task(self.next_id + k, rng) for k in range(rng.randint(1, 4))]
            self.next_id += len(added)
            s.add_tasks([*added, s.queue[0]] if s.queue else added)  # a known id is skipped
        elif roll < 0.70:
            off = [t.id for t in s.queue if rng.random() < 0.2]
            verdict = DriftVerdict(reasoning="some are off", off_goal_task_ids=off, drift_score=0.4)
            s.apply_drift(verdict, drift_gate(s.queue, verdict), seconds=float(i))
        elif roll < 0.76:
            s.add_lessons([f"lesson {rng.randint(0, 30)}"])
        elif roll < 0.80:
            s.refused_effects.append({"tool": "send", "key": f"k{i}", "args": {"n": i}})
        elif roll < 0.83:
            marker = Task(id=f"plan.{i}", brief="plan", verify="false", origin="plan")
            s.parked.append(ParkedTask(task=marker, reason="invalid twice"))
        elif roll < 0.85:
            s.queue = list(reversed(s.queue))  # a new list, outside the methods
        elif roll < 0.86 and s.completed:
            s.completed = s.completed[:-1]  # cut
        elif roll < 0.87:
            s.attempts = dict(s.attempts)
        elif roll < 0.90:
            s.artifacts.append(f"artifacts/{i}.log")
        else:
            s.goal_met = not s.goal_met
            s.last_predicate = PredicateRecord(
                met=s.goal_met, exit_code=0 if s.goal_met else 1, seconds=0.01, detail=f"{i}"
            )
        s.seconds_used = float(i)
        s.spent_usd = round(s.spent_usd + 0.001, 6)

    def lap(self, i: int) -> None:
        s, rng = self.state, self.rng
        picked = s.start_lap()
        attempt = s.start_task(picked)
        outcome = rng.random()
        run = CommandRun(exit_code=0, seconds=0.002, log=f"artifacts/{picked.id}.{attempt}.log")
        if outcome < 0.7:
            s.finish_done(picked, "c" * 40, attempt, "exit 0: ok", command=run)
        elif outcome < 0.8:
            s.finish_parked(picked, "not done", "exit 1", None, command=run)
        elif outcome < 0.9:
            s.route_resumed(VerifyOutcome.NOT_DONE, "exit 1", None, None)  # back in front
        # else: left in flight, as a kill leaves it


def states(seed: int, steps: int, tasks: int = 20) -> list[dict[str, Any]]:
    """The JSON of the state after each step (index 0: before any)."""
    evo = Evolution(seed, tasks)
    out = [evo.state.model_dump(mode="json")]
    for i in range(1, steps + 1):
        evo.step(i)
        out.append(evo.state.model_dump(mode="json"))
    return out


def state_at(seed: int, step: int, tasks: int = 20) -> dict[str, Any]:
    """The JSON of the state after ``step`` steps."""
    evo = Evolution(seed, tasks)
    for i in range(1, step + 1):
        evo.step(i)
    return evo.state.model_dump(mode="json")


def save_forever(checkpoint: Path, seed: int) -> None:
    """Save after every step, saying so on stdout, until killed."""
    evo = Evolution(seed)
    store = RunStateStore(checkpoint, whole_below=0)
    store.save(evo.state)
    print("saved 0", flush=True)
    i = 0
    while True:
        i += 1
        evo.step(i)
        print(f"saving {i}", flush=True)
        store.save(evo.state)
        print(f"saved {i}", flush=True)


if __name__ == "__main__":
    save_forever(Path(sys.argv[1]), int(sys.argv[2]))
