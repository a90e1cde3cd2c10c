"""The append-only journal: complete records back, a torn last line forgiven, nothing else."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from overnight.core.errors import CheckpointCorrupt, DiskFull
from overnight.store.journal import LINE_FORMAT, Journal, read_journal
from overnight.store.versions import WRITTEN_BY

SRC = Path(__file__).resolve().parents[2] / "src"


def sample_records(count: int) -> list[dict[str, Any]]:
    return [
        {
            "seq": i,
            "event": "charge",
            "usd": round(0.0137 * (i + 1), 6),
            "model": "some-model",
            "note": f"étape {i} ✓",
            "usage": {"input": 1200 + i, "output": 300, "cache": [i, i + 1]},
        }
        for i in range(count)
    ]


def write_journal(path: Path, records: list[dict[str, Any]]) -> None:
    with Journal(path, durable=False) as journal:
        for record in records:
            journal.append(record)


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "money.jsonl"
    records = sample_records(10)
    write_journal(path, records)
    assert read_journal(path) == records


def test_lines_are_canonical_and_carry_a_crc(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    write_journal(path, [{"b": 1, "a": "x"}])
    line = path.read_bytes()
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    on_disk = json.loads(line)
    crc = on_disk.pop("crc")
    body = b'{"a":"x","b":1,"by":"%s","fmt":%d}' % (WRITTEN_BY.encode(), LINE_FORMAT)
    assert crc == zlib.crc32(body)
    assert line == b'{"a":"x","b":1,"by":"%s","crc":%d,"fmt":2}\n' % (WRITTEN_BY.encode(), crc)


def test_values_json_cannot_hold_come_back_as_strings(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    write_journal(path, [{"usd": Decimal("0.10"), "where": Path("/tmp/x")}])
    assert read_journal(path) == [{"usd": "0.10", "where": "/tmp/x"}]


def test_integer_keys_verify_after_becoming_strings(tmp_path: Path) -> None:
    # Written sorted as numbers (2 before 10), re-sorted as strings on reading ("10" first):
    # the crc must be computed over the form a reader sees.
    path = tmp_path / "trace.jsonl"
    numbered: dict[Any, Any] = {10: "a", 2: "b"}
    write_journal(path, [numbered, {"n": 2}])
    assert read_journal(path) == [{"10": "a", "2": "b"}, {"n": 2}]


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_journal(tmp_path / "none.jsonl") == []


def test_reserved_crc_field_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    with Journal(path, durable=False) as journal, pytest.raises(ValueError, match="crc"):
        journal.append({"crc": 1})
    assert read_journal(path) == []


def test_handle_stays_open_between_appends(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    moved = tmp_path / "moved.jsonl"
    with Journal(path, durable=True) as journal:
        journal.append({"n": 1})
        path.rename(moved)
        # Still the same open file: the second record follows the first, wherever it is now.
        journal.append({"n": 2})
    assert not path.exists()
    assert read_journal(moved) == [{"n": 1}, {"n": 2}]


def test_close_then_append_reopens(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    journal = Journal(path, durable=False)
    journal.append({"n": 1})
    journal.close()
    journal.close()
    journal.append({"n": 2})
    journal.close()
    assert read_journal(path) == [{"n": 1}, {"n": 2}]


def test_torn_last_line_is_ignored_and_repaired(tmp_path: Path) -> None:
    path = tmp_path / "money.jsonl"
    records = sample_records(6)
    write_journal(path, records)
    raw = path.read_bytes()
    last_start = raw.rstrip(b"\n").rfind(b"\n") + 1
    rng = random.Random(7)
    for _ in range(50):
        # Anywhere from "the whole last line gone" to "only its newline gone".
        cut = rng.randint(last_start, len(raw) - 1)
        path.write_bytes(raw[:cut])
        assert read_journal(path) == records[:-1]
        # A writer resuming after the kill drops the fragment instead of gluing onto it.
        write_journal(path, [{"resumed": True}])
        assert read_journal(path) == [*records[:-1], {"resumed": True}]


def test_torn_line_may_split_a_multibyte_character(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    records = [{"n": 1}, {"n": 2}]
    write_journal(path, records)
    # Journal lines are ASCII (non-ASCII is escaped), so forge the split by hand.
    with open(path, "ab") as file:
        file.write('{"note":"夜'.encode()[:-1])
    assert read_journal(path) == records


def test_corrupt_middle_line_raises(tmp_path: Path) -> None:
    path = tmp_path / "money.jsonl"
    write_journal(path, sample_records(4))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][: len(lines[1]) // 2] + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(CheckpointCorrupt, match=r"line 2 unreadable"):
        read_journal(path)


def test_middle_line_with_wrong_crc_raises(tmp_path: Path) -> None:
    path = tmp_path / "money.jsonl"
    write_journal(path, sample_records(4))
    lines = path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[2])
    record["usd"] = 1_000_000
    lines[2] = json.dumps(record).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(CheckpointCorrupt, match=r"line 3 unreadable"):
        read_journal(path)


def test_last_line_with_wrong_crc_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "money.jsonl"
    records = sample_records(3)
    write_journal(path, records)
    with open(path, "ab") as file:
        file.write(b'{"seq":3,"usd":0.5,"crc":12345}\n')
    assert read_journal(path) == records
    write_journal(path, [{"seq": 4}])
    assert read_journal(path) == [*records, {"seq": 4}]


def test_non_object_middle_line_raises(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    write_journal(path, [{"n": 1}])
    good_line = path.read_bytes()
    path.write_bytes(good_line + b"[1,2]\n" + good_line)
    with pytest.raises(CheckpointCorrupt, match=r"line 2 unreadable"):
        read_journal(path)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_no_space_left_is_disk_full() -> None:
    # /dev/full answers every write with ENOSPC: a real full device, no patching.
    journal = Journal(Path("/dev/full"), durable=False)
    with pytest.raises(DiskFull) as caught:
        journal.append({"n": 1})
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.__cause__.errno == errno.ENOSPC
    journal.close()


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from overnight.store.journal import Journal

    journal = Journal(Path(sys.argv[1]), durable=True)
    i = 0
    while True:
        journal.append({"seq": i, "pad": "x" * (i % 97), "note": "nuit ✓"})
        if i == 0:
            print("started", flush=True)
        i += 1
    """
)


@pytest.mark.chaos
def test_kill_mid_append_leaves_a_readable_prefix(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    rng = random.Random(99)
    for trial in range(5):
        path = tmp_path / f"trace-{trial}.jsonl"
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "started\n"
            time.sleep(rng.uniform(0.01, 0.15))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
            if child.stdout is not None:
                child.stdout.close()
        assert child.returncode == -signal.SIGKILL

        records = read_journal(path)
        assert records, "the child reported a first append"
        assert [r["seq"] for r in records] == list(range(len(records)))
        assert all(
            r == {"seq": i, "pad": "x" * (i % 97), "note": "nuit ✓"} for i, r in enumerate(records)
        )

        write_journal(path, [{"resumed": trial}])
        assert read_journal(path) == [*records, {"resumed": trial}]
