"""Formats: each run file says its format and who wrote it; a newer one is refused as newer,
never read as damage; every earlier one still read is lifted to the current shape."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest

from overnight.core.errors import CheckpointCorrupt
from overnight.store.checkpoint import load_checkpoint, read_snapshot, save_checkpoint
from overnight.store.journal import LINE_FORMAT, Journal, read_intact_records, read_journal
from overnight.store.migrations import LIFTS, READABLE_VERSIONS, SCHEMA_VERSION, lift
from overnight.store.run_state import (
    RunStateStore,
    check_formats,
    journal_path,
    load_run_state,
)
from overnight.store.versions import WRITTEN_BY, NewerFormat
from tests.store.run_fixtures import body_shape, fixture_dirs, shape_path

# -- journal lines ----------------------------------------------------------------------------


def line(record: dict[str, Any], **frame: Any) -> bytes:
    """A journal line as an overnight of another format would write it: ``frame`` fields
    (``fmt``, ``by``) beside the record, a CRC-32 over both."""
    plain = {**record, **frame}
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"))
    plain["crc"] = zlib.crc32(text.encode())
    return json.dumps(plain, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def test_a_line_says_its_format_and_its_writer_and_reads_back_without_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spend.jsonl"
    with Journal(path, durable=False) as journal:
        journal.append({"usd": 0.5})
    on_disk = json.loads(path.read_bytes())
    assert (on_disk["fmt"], on_disk["by"]) == (LINE_FORMAT, WRITTEN_BY)
    assert read_journal(path) == [{"usd": 0.5}]


@pytest.mark.parametrize("field", ["fmt", "by", "crc"])
def test_a_record_may_not_use_a_field_of_the_frame(tmp_path: Path, field: str) -> None:
    with (
        Journal(tmp_path / "j.jsonl", durable=False) as journal,
        pytest.raises(ValueError, match=repr(field)),
    ):
        journal.append({field: 1})


def test_a_line_without_a_format_is_format_one_and_read(tmp_path: Path) -> None:
    path = tmp_path / "spend.jsonl"
    path.write_bytes(line({"usd": 0.25}))
    with Journal(path, durable=False) as journal:
        journal.append({"usd": 0.5})
    assert read_journal(path) == [{"usd": 0.25}, {"usd": 0.5}]


@pytest.mark.parametrize("last", [False, True], ids=["middle", "last"])
def test_a_line_of_a_newer_format_is_refused_as_newer_wherever_it_is(
    tmp_path: Path, last: bool
) -> None:
    path = tmp_path / "spend.jsonl"
    # Its checksum may be computed otherwise: the format is read before the checksum.
    newer = json.dumps({"usd": 1.0, "fmt": LINE_FORMAT + 1, "by": "9.4.0", "crc": "sha:1"})
    lines = [line({"usd": 0.25}), newer.encode() + b"\n"]
    path.write_bytes(b"".join(lines if last else [*lines, line({"usd": 0.5})]))
    with pytest.raises(NewerFormat) as caught:
        read_journal(path)
    assert caught.value.problem == (
        f"{path} line 2 was written by overnight 9.4.0 (journal format {LINE_FORMAT + 1}); "
        f"this is overnight {WRITTEN_BY} (format {LINE_FORMAT}): upgrade to resume"
    )
    assert not isinstance(caught.value, CheckpointCorrupt)


def test_a_writer_never_cuts_off_a_line_of_a_newer_format(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    newer = json.dumps({"n": 1, "fmt": LINE_FORMAT + 1, "crc": "sha:1"}).encode() + b"\n"
    path.write_bytes(newer)
    with Journal(path, durable=False) as journal:
        journal.append({"n": 2})
    assert path.read_bytes().startswith(newer)
    # A file that is a convenience skips the line it cannot read.
    assert read_intact_records(path) == [{"n": 2}]


@pytest.mark.parametrize("fmt", [0, -1, "2", True, None, 1.5])
def test_a_format_never_written_is_damage(tmp_path: Path, fmt: object) -> None:
    path = tmp_path / "spend.jsonl"
    path.write_bytes(line({"usd": 1.0}, fmt=fmt) + line({"usd": 2.0}))
    with pytest.raises(CheckpointCorrupt, match="line 1 unreadable"):
        read_journal(path)


# -- checkpoint formats -------------------------------------------------------------------------


def test_every_earlier_format_read_has_its_lift() -> None:
    assert tuple(range(1, SCHEMA_VERSION + 1)) == READABLE_VERSIONS
    assert sorted(LIFTS) == list(READABLE_VERSIONS[:-1])
    assert lift({"a": 1}, SCHEMA_VERSION) == {"a": 1}


def test_the_body_has_the_shape_of_the_current_format() -> None:
    stored = json.loads(shape_path(SCHEMA_VERSION).read_text(encoding="utf-8"))
    assert body_shape() == stored, (
        f"the checkpoint body's shape is no longer that of format {SCHEMA_VERSION}: an "
        f"overnight of format {SCHEMA_VERSION} would take it for damage. Raise SCHEMA_VERSION "
        f"with a lift from {SCHEMA_VERSION}, and store a fixture and the shape "
        "(python -m tests.store.run_fixtures --help)"
    )


def frame_version(fixture: Path) -> int:
    version: int = json.loads((fixture / "checkpoint.json").read_bytes())["schema_version"]
    return version


def line_formats(fixture: Path) -> set[int]:
    journal = fixture / "checkpoint.journal"
    lines = journal.read_bytes().splitlines() if journal.exists() else []
    return {json.loads(raw).get("fmt", 1) for raw in lines}


def test_a_fixture_of_every_format_read_and_of_what_this_overnight_writes() -> None:
    assert {frame_version(f) for f in fixture_dirs()} == set(READABLE_VERSIONS)
    current = [
        f
        for f in fixture_dirs()
        if frame_version(f) == SCHEMA_VERSION and line_formats(f) == {LINE_FORMAT}
    ]
    assert current, f"no fixture of checkpoint format {SCHEMA_VERSION}, lines {LINE_FORMAT}"


@pytest.mark.parametrize("fixture", fixture_dirs(), ids=lambda p: p.name)
def test_each_stored_fixture_loads_and_saves_in_the_current_format(
    tmp_path: Path, fixture: Path
) -> None:
    checkpoint = tmp_path / "checkpoint.json"
    for name in ("checkpoint.json", "checkpoint.journal"):
        if (fixture / name).exists():
            shutil.copy(fixture / name, tmp_path / name)
    state = load_run_state(checkpoint)
    assert state is not None
    assert state.in_progress is not None and state.in_progress.task.id == "t_0"
    assert [t.id for t in state.queue] == ["t_1"]

    RunStateStore(checkpoint).compact(state)
    snapshot = read_snapshot(checkpoint)
    assert snapshot is not None and snapshot.version == SCHEMA_VERSION
    assert not journal_path(checkpoint).exists()
    assert load_run_state(checkpoint) == state


def current_body() -> dict[str, Any]:
    fixture = next(f for f in fixture_dirs() if frame_version(f) == SCHEMA_VERSION)
    body = load_checkpoint(fixture / "checkpoint.json")
    assert body is not None
    return body


def test_a_body_lacking_fields_added_later_loads_with_their_defaults(tmp_path: Path) -> None:
    body = current_body()
    task = body["queue"][0]
    # Each record as the first overnight to write it wrote it.
    body["base_tests"] = {
        "pytest -q": {
            "kind": "base_tests",
            "command": "pytest -q",
            "commit": body["base_commit"],
            "collected": ["t.py::a", "t.py::b"],
            "allowed": {"t.py::b": "skip: numpy is not installed"},
        }
    }
    body["last_predicate"] = {
        "kind": "predicate",
        "met": False,
        "exit_code": 1,
        "seconds": 0.5,
        "detail": "",
    }
    body["completed"] = [{"kind": "completed", "task": task, "commit": "c" * 40, "attempts": 1}]
    body["parked"] = [{"kind": "parked", "task": {**task, "id": "t_9"}, "reason": "failed"}]
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, body, seq=1)

    state = load_run_state(path)

    assert state is not None
    record = state.base_tests["pytest -q"]
    assert (record.complete, record.skipped, record.ran, record.keys) == (False, {}, [], {})
    assert record.allowed == {"t.py::b": "skip: numpy is not installed"}
    predicate = state.last_predicate
    assert predicate is not None
    assert (predicate.stayed_skipped, predicate.at_start, predicate.allowed) == ([], False, [])
    assert predicate.evidence == "exit_code_only" and predicate.ran
    assert state.completed[0].verify_detail == "" and state.completed[0].via == "lap"
    assert state.parked[0].held_for == [] and state.parked[0].patch is None


def test_a_field_no_format_has_is_damage_not_a_newer_format(tmp_path: Path) -> None:
    body = {**current_body(), "invented": 1}
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, body, seq=1)
    with pytest.raises(CheckpointCorrupt, match="does not fit the run state"):
        load_run_state(path)


# -- the check before a resume ---------------------------------------------------------------


def test_the_check_before_a_resume_reports_only_a_newer_format(tmp_path: Path) -> None:
    checkpoint, spend = tmp_path / "checkpoint.json", tmp_path / "spend.jsonl"
    check_formats(checkpoint, spend)  # nothing there yet
    checkpoint.write_bytes(b"{torn")
    spend.write_bytes(b"[1]\n" + line({"usd": 1.0}))
    check_formats(checkpoint, spend)  # damage is for the load to report
    spend.write_bytes(line({"usd": 1.0}, fmt=LINE_FORMAT + 1))
    with pytest.raises(NewerFormat, match=r"spend\.jsonl line 1"):
        check_formats(checkpoint, spend)
    spend.unlink()
    journal_path(checkpoint).write_bytes(line({"seq": 2}, fmt=LINE_FORMAT + 1))
    with pytest.raises(NewerFormat, match=r"checkpoint\.journal line 1"):
        check_formats(checkpoint, spend)


def test_the_check_before_a_resume_finds_a_newer_line_among_many_and_no_false_one(
    tmp_path: Path,
) -> None:
    """The check reads no checksum of the thousands of lines a long night's journal holds;
    a field of a record that happens to be called ``fmt`` is not a line's format."""
    checkpoint, spend = tmp_path / "checkpoint.json", tmp_path / "spend.jsonl"
    records = [{"usd": 0.01, "n": n} for n in range(2000)]
    spend.write_bytes(b"".join(line(r) for r in records) + line({"detail": {"fmt": 99}}))
    check_formats(checkpoint, spend)  # a nested "fmt" is a record's own field
    spaced = json.dumps({"fmt": LINE_FORMAT + 1, "by": "9.0.0", "crc": 0}, indent=1)
    spend.write_bytes(
        b"".join(line(r) for r in records) + spaced.replace("\n", " ").encode() + b"\n"
    )
    with pytest.raises(NewerFormat, match=r"spend\.jsonl line 2001"):
        check_formats(checkpoint, spend)


@pytest.mark.parametrize("by", ["0.3.0\x1b[2J", "", 3, "x" * 65, None])
def test_a_writer_that_is_not_a_version_is_not_shown(tmp_path: Path, by: object) -> None:
    path = tmp_path / "spend.jsonl"
    path.write_text(json.dumps({"fmt": LINE_FORMAT + 1, "by": by, "crc": 0}) + "\n")
    with pytest.raises(NewerFormat) as caught:
        read_journal(path)
    assert caught.value.written_by is None
    assert "written by a newer overnight (journal format" in caught.value.problem
    assert "\x1b" not in str(caught.value)
