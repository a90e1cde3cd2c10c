"""The run state on disk: a snapshot plus a journal of changes, loaded as one state whatever
instant a process died at, and refused by name when the files were harmed afterwards."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from overnight.core.errors import CheckpointCorrupt
from overnight.core.state import RunState
from overnight.core.tasks import CommandRun
from overnight.store.checkpoint import load_checkpoint, read_snapshot
from overnight.store.journal import Journal
from overnight.store.run_state import RunStateStore, journal_path, load_run_state
from tests.store.states import Evolution, fresh_state, state_at, states

ROOT = Path(__file__).resolve().parents[2]


def dump(state: RunState | None) -> dict[str, Any] | None:
    return None if state is None else state.model_dump(mode="json")


def saved_run(directory: Path, seed: int, steps: int) -> tuple[Path, list[Any]]:
    """A checkpoint saved after each of ``steps`` steps or more, in journal mode, ending with
    at least five journal lines; and the state after each step (index 0: before any)."""
    directory.mkdir(exist_ok=True)
    path = directory / "checkpoint.json"
    evo = Evolution(seed)
    store = RunStateStore(path, whole_below=0)
    store.save(evo.state)
    done = 0
    while done < steps or not journal_path(path).exists() or len(journal_lines(path)) < 5:
        done += 1
        evo.step(done)
        store.save(evo.state)
    store.close()
    return path, states(seed, done)


def journal_lines(path: Path) -> list[bytes]:
    return journal_path(path).read_bytes().splitlines(keepends=True)


# -- what is saved is what is loaded ----------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_every_save_loads_back_as_the_state_it_saved(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "checkpoint.json"
    evo = Evolution(seed)
    store = RunStateStore(path, whole_below=0)
    store.save(evo.state)
    for i in range(1, 301):
        evo.step(i)
        store.save(evo.state)
        assert dump(load_run_state(path)) == dump(evo.state), f"step {i}"
    # The journal carried most saves: the snapshot was rewritten only now and then.
    assert 2 <= store.compactions < 30


def test_a_loaded_state_goes_on_saving_from_where_it_was(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    evo = Evolution(9)
    store = RunStateStore(path, whole_below=0)
    store.save(evo.state)
    for i in range(1, 80):
        evo.step(i)
        store.save(evo.state)
    # Another process: it loads the state, and its first save writes it whole.
    loaded = load_run_state(path)
    assert loaded is not None
    evo.state = loaded
    store = RunStateStore(path, whole_below=0)
    for i in range(80, 160):
        evo.step(i)
        store.save(evo.state)
        assert dump(load_run_state(path)) == dump(evo.state), f"step {i}"
    assert store.compactions >= 1


def test_closing_leaves_the_whole_state_in_the_snapshot_alone(tmp_path: Path) -> None:
    path, expected = saved_run(tmp_path / "run", seed=5, steps=120)
    assert journal_path(path).exists()
    state = load_run_state(path)
    assert state is not None
    RunStateStore(path, whole_below=0).compact(state)
    assert not journal_path(path).exists()
    assert load_checkpoint(path) == expected[-1]
    assert dump(load_run_state(path)) == expected[-1]


def test_a_small_state_is_written_whole_every_time(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    evo = Evolution(6, tasks=3)
    store = RunStateStore(path)  # the default threshold
    store.save(evo.state)
    for i in range(1, 20):
        evo.step(i)
        store.save(evo.state)
        assert load_checkpoint(path) == dump(evo.state)
    assert not journal_path(path).exists()


def test_a_copied_state_saves_whole_and_stays_equal(tmp_path: Path) -> None:
    state = fresh_state()
    twin = state.model_copy(deep=True)
    assert twin == state  # bookkeeping is not state
    store = RunStateStore(tmp_path / "checkpoint.json", whole_below=0)
    store.save(state)
    twin.start_lap()
    store.save(twin)  # never saved: written whole, not as a change of ``state``
    assert dump(load_run_state(tmp_path / "checkpoint.json")) == dump(twin)


# -- kill -9 at any instant ---------------------------------------------------------------------


def test_kill_minus_nine_while_saving_leaves_a_state_the_child_saved(tmp_path: Path) -> None:
    rng = random.Random(20261203)
    seeds_checked = 0
    for trial in range(8):
        run = tmp_path / f"trial{trial}"
        run.mkdir()
        path = run / "checkpoint.json"
        seed = 100 + trial
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.store.states", str(path), str(seed)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])},
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"saved 0", "the child did not start"
        time.sleep(rng.uniform(0.05, 0.8))
        child.send_signal(signal.SIGKILL)
        child.wait()
        said = [line.split() for line in child.stdout.read().decode().splitlines()]
        saved = max([0] + [int(n) for word, n in said if word == "saved"])
        saving = max([saved] + [int(n) for word, n in said if word == "saving"])
        loaded = load_run_state(path)
        assert loaded is not None
        step = int(loaded.seconds_used)
        # The last save reported is on disk, and the one in flight at most.
        assert saved <= step <= saving, (trial, saved, step, saving)
        assert dump(loaded) == state_at(seed, step), (trial, step)
        seeds_checked += saving > 50
    assert seeds_checked >= 4, "the children were killed before they had saved much"


# -- damage -------------------------------------------------------------------------------------


def test_a_journal_cut_anywhere_loads_the_last_whole_save(tmp_path: Path) -> None:
    path, expected = saved_run(tmp_path / "run", seed=7, steps=60)
    journal = journal_path(path)
    raw = journal.read_bytes()
    snapshot = read_snapshot(path)
    assert snapshot is not None
    first_step = snapshot.id.seq - 1  # save k holds step k - 1 (save 1 was the start)
    ends = [i + 1 for i, byte in enumerate(raw) if byte == ord("\n")]
    rng = random.Random(11)
    cuts = sorted({rng.randrange(len(raw) + 1) for _ in range(150)} | set(ends[:3]) | {0})
    for cut in cuts:
        journal.write_bytes(raw[:cut])
        whole = sum(1 for end in ends if end <= cut)
        state = load_run_state(path)
        assert dump(state) == expected[first_step + whole], f"cut at {cut}"


def test_a_damaged_line_before_the_last_is_refused(tmp_path: Path) -> None:
    path, expected = saved_run(tmp_path / "run", seed=8, steps=40)
    lines = journal_lines(path)
    assert len(lines) > 4
    for at in (0, 1, len(lines) // 2, len(lines) - 2):
        damaged = list(lines)
        text = bytearray(damaged[at])
        text[len(text) // 2] ^= 0x01
        damaged[at] = bytes(text)
        journal_path(path).write_bytes(b"".join(damaged))
        with pytest.raises(CheckpointCorrupt, match=f"line {at + 1} unreadable"):
            load_run_state(path)
    # The same damage on the last line is what a torn append looks like: dropped.
    damaged = list(lines)
    damaged[-1] = damaged[-1][:-5] + b"#" + damaged[-1][-4:]
    journal_path(path).write_bytes(b"".join(damaged))
    assert dump(load_run_state(path)) == expected[-2]


def test_a_missing_line_is_a_gap(tmp_path: Path) -> None:
    path, _ = saved_run(tmp_path / "run", seed=9, steps=40)
    lines = journal_lines(path)
    journal_path(path).write_bytes(b"".join(lines[:3] + lines[4:]))
    with pytest.raises(CheckpointCorrupt, match=r"line 4 is save \d+, expected"):
        load_run_state(path)


def test_a_journal_of_another_snapshot_is_refused(tmp_path: Path) -> None:
    mine, _ = saved_run(tmp_path / "a", seed=10, steps=30)
    theirs, _ = saved_run(tmp_path / "b", seed=11, steps=30)
    shutil.copy(journal_path(theirs), journal_path(mine))
    with pytest.raises(CheckpointCorrupt, match="continues snapshot"):
        load_run_state(mine)


def test_an_older_journal_of_the_same_run_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    evo = Evolution(12)
    store = RunStateStore(path, whole_below=0)
    store.save(evo.state)
    old: bytes | None = None
    compactions = store.compactions
    i = 0
    while store.compactions < compactions + 2:  # two snapshots later
        i += 1
        evo.step(i)
        if store.compactions == compactions and journal_path(path).exists():
            old = journal_path(path).read_bytes()
        store.save(evo.state)
    assert old is not None
    journal_path(path).write_bytes(old)
    with pytest.raises(CheckpointCorrupt, match="continues snapshot"):
        load_run_state(path)


def test_a_journal_without_its_snapshot_is_refused(tmp_path: Path) -> None:
    path, _ = saved_run(tmp_path / "run", seed=13, steps=30)
    path.unlink()
    with pytest.raises(CheckpointCorrupt, match="no snapshot"):
        load_run_state(path)


def test_a_change_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    path, _ = saved_run(tmp_path / "run", seed=14, steps=30)
    snapshot = read_snapshot(path)
    assert snapshot is not None
    # A whole, well-framed line whose queue operation names a task that is not there.
    with Journal(journal_path(path), durable=True) as journal:
        last = json.loads(journal_lines(path)[-1])
        journal.append(
            {
                "kind": "checkpoint_delta",
                "seq": last["seq"] + 1,
                "base": None,
                "delta": {"queue": [{"op": "take", "at": 0, "task_id": "nobody"}]},
            }
        )
    with pytest.raises(CheckpointCorrupt, match="does not fit the state"):
        load_run_state(path)


# -- compaction killed halfway --------------------------------------------------------------------


def test_compaction_killed_between_snapshot_and_journal_removal(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    evo = Evolution(15)
    store = RunStateStore(path, whole_below=0)
    store.save(evo.state)
    i = 0
    while True:
        i += 1
        evo.step(i)
        before = store.compactions
        kept = journal_path(path).read_bytes() if journal_path(path).exists() else b""
        store.save(evo.state)
        if store.compactions > before and kept:
            break
    # What a kill after the new snapshot's rename and before the journal's removal leaves:
    journal_path(path).write_bytes(kept)
    state = load_run_state(path)
    assert dump(state) == dump(evo.state)  # the snapshot's state; the folded journal not replayed
    # The next process goes on from there, and a load after it is right again.
    assert state is not None
    evo.state = state
    store = RunStateStore(path, whole_below=0)
    for j in range(i + 1, i + 40):
        evo.step(j)
        store.save(evo.state)
        assert dump(load_run_state(path)) == dump(evo.state), j
    # Killed again at the same point of its first compaction: still right.
    kept = journal_path(path).read_bytes()
    store.compact(evo.state)
    journal_path(path).write_bytes(kept)
    assert dump(load_run_state(path)) == dump(evo.state)
    store = RunStateStore(path, whole_below=0)
    evo.step(i + 40)
    store.save(evo.state)
    assert dump(load_run_state(path)) == dump(evo.state)


# -- what a save costs --------------------------------------------------------------------------


def finished_state(n: int) -> RunState:
    """A state with ``n`` finished tasks and ten still queued."""
    state = fresh_state(tasks=n + 10)
    for _ in range(n):
        picked = state.start_lap()
        attempt = state.start_task(picked)
        run = CommandRun(exit_code=0, seconds=0.002, log=f"artifacts/{picked.id}.log")
        state.finish_done(picked, "c" * 40, attempt, "exit 0: ok", command=run)
    return state


def lap_bytes(state: RunState, store: RunStateStore, laps: int) -> list[int]:
    """Bytes written by each save of ``laps`` laps (three saves a lap, as a night makes)."""
    sizes = []
    for _ in range(laps):
        before = store.bytes_written
        picked = state.start_lap()
        attempt = state.start_task(picked)
        store.save(state)
        run = CommandRun(exit_code=0, seconds=0.002, log=f"artifacts/{picked.id}.log")
        state.finish_done(picked, "c" * 40, attempt, "exit 0: ok", command=run)
        store.save(state)
        state.goal_met = False
        state.seconds_used += 1.0
        store.save(state)
        sizes.append(store.bytes_written - before)
    return sizes


def test_bytes_written_per_save_do_not_grow_with_finished_tasks(tmp_path: Path) -> None:
    per_lap: dict[int, list[int]] = {}
    snapshot_bytes: dict[int, int] = {}
    for n in (200, 4000):
        path = tmp_path / f"n{n}" / "checkpoint.json"
        path.parent.mkdir()
        state = finished_state(n)
        store = RunStateStore(path)
        store.save(state)  # the first save of a process: whole
        snapshot_bytes[n] = store.bytes_written
        per_lap[n] = lap_bytes(state, store, 8)
        assert store.compactions == 1
    assert snapshot_bytes[4000] > 15 * snapshot_bytes[200]
    # The same bytes lap for lap at 20 times the finished tasks (the ids are longer by a digit
    # or two; the first lap names the snapshot its journal continues).
    for small, large in zip(per_lap[200], per_lap[4000], strict=True):
        assert small <= large <= small + 32, per_lap
    assert max(per_lap[4000]) < snapshot_bytes[200] / 10


def test_compaction_keeps_the_bytes_a_save_writes_bounded_on_average(tmp_path: Path) -> None:
    store = RunStateStore(tmp_path / "checkpoint.json", whole_below=0)
    state = finished_state(100)
    store.save(state)
    deltas = []
    start, saves = store.bytes_written, 0
    while store.compactions < 5:  # the journal outgrew the snapshot four times
        before = store.compactions, store.bytes_written
        state.steps_used += 1
        state.seconds_used += 1.0
        store.save(state)
        saves += 1
        if store.compactions == before[0]:
            deltas.append(store.bytes_written - before[1])
    # A change of d bytes costs d in the journal and, folded into a snapshot, about d again.
    assert (store.bytes_written - start) / saves < 3 * max(deltas)


def test_a_compaction_after_a_load_reads_a_journal_that_grew_since_the_load(
    tmp_path: Path,
) -> None:
    # The first compaction after a load takes the journal's base and last save from the
    # load's own read, but only while the file is the one the load read.
    path = tmp_path / "checkpoint.json"
    evo = Evolution(11)
    writer = RunStateStore(path, whole_below=0)
    writer.save(evo.state)
    for i in range(1, 40):
        evo.step(i)
        writer.save(evo.state)
    loaded = load_run_state(path)
    assert loaded is not None
    for i in range(40, 46):  # the journal grows after the load
        evo.step(i)
        writer.save(evo.state)
    writer.close()
    last_line = json.loads(journal_lines(path)[-1])["seq"]
    RunStateStore(path, whole_below=0).compact(loaded)
    snapshot = read_snapshot(path)
    assert snapshot is not None and snapshot.id.seq > last_line
    assert not journal_path(path).exists()
    assert dump(load_run_state(path)) == dump(loaded)


def _journaled(path: Path, seed: int, steps: int) -> Evolution:
    evo = Evolution(seed)
    writer = RunStateStore(path, whole_below=0)
    writer.save(evo.state)
    i = 0
    while i < steps or not journal_path(path).exists() or len(journal_lines(path)) < 5:
        i += 1
        evo.step(i)
        writer.save(evo.state)
    writer.close()
    return evo


def test_a_state_loaded_to_continue_appends_to_the_journal_it_was_read_from(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.json"
    _journaled(path, seed=12, steps=40)
    snapshot_before = path.read_bytes()
    lines_before = len(journal_lines(path))
    loaded = load_run_state(path, to_continue=True)
    assert loaded is not None
    loaded.resumes += 1  # what a resume changes before its first save
    loaded.stopped_reason = None
    store = RunStateStore(path, whole_below=0)
    store.continue_loaded(loaded)
    store.save(loaded)
    store.close()
    # One line more on the same journal, the snapshot untouched, and the state loads back.
    assert store.compactions == 0
    assert path.read_bytes() == snapshot_before
    assert len(journal_lines(path)) == lines_before + 1
    assert dump(load_run_state(path)) == dump(loaded)


def test_a_state_loaded_to_continue_is_written_whole_when_the_files_changed_since(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.json"
    evo = _journaled(path, seed=13, steps=40)
    loaded = load_run_state(path, to_continue=True)
    assert loaded is not None
    other = RunStateStore(path, whole_below=0)  # another writer compacts meanwhile
    other.compact(evo.state)
    store = RunStateStore(path, whole_below=0)
    store.continue_loaded(loaded)
    store.save(loaded)
    assert store.compactions == 1
    assert dump(load_run_state(path)) == dump(loaded)


def test_a_plain_load_never_continues_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    _journaled(path, seed=14, steps=40)
    loaded = load_run_state(path)  # a reader's load: status, report
    assert loaded is not None
    store = RunStateStore(path, whole_below=0)
    store.continue_loaded(loaded)
    store.save(loaded)
    assert store.compactions == 1
