"""The state's own bookkeeping for saves: the order a lap takes tasks in, and the changes a save
writes, replayed on the state before them, giving the state after them."""

from __future__ import annotations

import math
import random

import pytest

from overnight.core.drift import DriftVerdict, drift_gate
from overnight.core.state import StateDelta, apply_delta
from overnight.core.tasks import Task
from tests.store.states import Evolution, fresh_state


def highest(queue: list[Task]) -> int:
    """Where the task of highest value is, the earliest among equals (read plainly)."""
    return max(range(len(queue)), key=lambda i: (queue[i].value, -i))


def make(n: int, value: float) -> Task:
    return Task(id=f"x{n}", command="true", verify="true", value=value)


@pytest.mark.parametrize("seed", range(6))
def test_a_lap_takes_the_highest_value_earliest_first_whatever_was_done_to_the_queue(
    seed: int,
) -> None:
    rng = random.Random(seed)
    values = [0.0, 1.0, 2.0, -1.0, 0.5] if seed % 2 else [0.0]
    state = fresh_state(tasks=0)
    state.add_tasks([make(n, rng.choice(values)) for n in range(50)])
    made = 50
    for _ in range(600):
        roll = rng.random()
        if roll < 0.5 and state.queue:
            expected = state.queue[highest(state.queue)]
            assert state.start_lap() is expected
            if rng.random() < 0.2:
                state.in_progress = None
                state.requeue_front(expected)
        elif roll < 0.75:
            state.add_tasks([make(made + k, rng.choice(values)) for k in range(3)])
            made += 3
        elif roll < 0.85 and state.queue:
            off = [t.id for t in state.queue if rng.random() < 0.3]
            verdict = DriftVerdict(reasoning="r", off_goal_task_ids=off, drift_score=0.4)
            state.apply_drift(verdict, drift_gate(state.queue, verdict), 1.0)
        elif roll < 0.92:
            state.queue = rng.sample(state.queue, len(state.queue))  # shuffled, a new list
        else:
            state.queue.append(make(made, rng.choice(values)))  # behind the methods' back
            made += 1


def test_a_value_that_is_not_a_number_comes_last() -> None:
    state = fresh_state(tasks=0)
    state.add_tasks([make(0, math.nan), make(1, 0.0), make(2, 1.0)])
    assert [state.start_lap().id for _ in range(3)] == ["x2", "x1", "x0"]


@pytest.mark.parametrize("seed", range(4))
def test_each_delta_replayed_on_the_state_before_gives_the_state_after(seed: int) -> None:
    evo = Evolution(seed)
    assert evo.state.take_delta() is None  # never saved: the first save is whole
    before = evo.state.model_dump(mode="json")
    for i in range(1, 400):
        evo.step(i)
        delta = evo.state.take_delta()
        assert delta is not None
        replayed = StateDelta.model_validate(delta.model_dump(mode="json"))
        apply_delta(before, replayed)
        after = evo.state.model_dump(mode="json")
        assert before == after, f"step {i}"


def test_a_lap_is_written_as_a_change_not_as_the_queue() -> None:
    state = fresh_state(tasks=500)
    state.mark_saved()
    picked = state.start_lap()
    state.start_task(picked)
    delta = state.take_delta()
    assert delta is not None
    assert [op.op for op in delta.queue] == ["take"]
    assert set(delta.values) == {"laps", "steps_used", "in_progress"}
    assert delta.attempts == {picked.id: 1}
    assert not delta.appended


@pytest.mark.parametrize(
    "op",
    [
        {"op": "take", "at": 99, "task_id": "t0"},
        {"op": "take", "at": 0, "task_id": "t5"},
        {"op": "drop", "ids": ["t1", "nobody"]},
    ],
)
def test_a_queue_change_that_does_not_fit_is_refused(op: dict[str, object]) -> None:
    body = fresh_state(tasks=3).model_dump(mode="json")
    with pytest.raises(ValueError):
        apply_delta(body, StateDelta.model_validate({"queue": [op]}))


def test_a_field_the_state_lacks_is_refused() -> None:
    body = fresh_state(tasks=3).model_dump(mode="json")
    with pytest.raises(ValueError, match="no field"):
        apply_delta(body, StateDelta(values={"owner": "someone"}))
    with pytest.raises(ValueError, match="cannot append"):
        apply_delta(body, StateDelta(appended={"queue": []}))
