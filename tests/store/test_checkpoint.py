"""The checkpoint frame: atomic save, and every damaged file refused by name."""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from overnight.core.errors import CheckpointCorrupt
from overnight.store.checkpoint import SCHEMA_VERSION, load_checkpoint, save_checkpoint
from overnight.store.versions import WRITTEN_BY, NewerFormat


def realistic_body() -> dict[str, Any]:
    return {
        "run_id": "2024-06-01T23:00:00Z-7f3a",
        "goal": "Réécrire le module d'import — ✓ garder l'API; 夜間に完了させる",
        "queue": [
            {"id": "t1", "title": "añadir pruebas para ñandú", "attempts": 0, "deps": []},
            {"id": "t2", "title": "Überarbeite den Parser", "attempts": 2, "deps": ["t1"]},
            {"id": "t3", "title": "emoji in commit messages 🌙", "attempts": 1, "deps": []},
        ],
        "done": [{"id": "t0", "verdict": "verified", "cost_usd": 0.4125}],
        "ledger": {"spent_usd": 1.875, "tokens": 182_334, "steps": 41},
        "notes": None,
        "flags": {"blocked": False, "wrap_up": True},
    }


def test_round_trip_realistic_body(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    body = realistic_body()
    save_checkpoint(path, body)
    assert load_checkpoint(path) == body


def test_missing_file_is_none(tmp_path: Path) -> None:
    assert load_checkpoint(tmp_path / "nothing-here.json") is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


# Sharing tmp_path across examples is fine: every save replaces the same file whole.
@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.dictionaries(st.text(), json_values, max_size=6))
def test_round_trip_any_json_object(tmp_path: Path, body: dict[str, Any]) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, body)
    assert load_checkpoint(path) == body


def test_every_truncation_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, realistic_body())
    raw = path.read_bytes()
    rng = random.Random(20240601)
    refused = 0
    split_characters = 0
    for _ in range(200):
        cut = rng.randint(1, len(raw) - 1)
        # A UTF-8 continuation byte at the cut means the cut splits a character.
        if raw[cut] & 0b1100_0000 == 0b1000_0000:
            split_characters += 1
        path.write_bytes(raw[:cut])
        with pytest.raises(CheckpointCorrupt):
            load_checkpoint(path)
        refused += 1
    assert refused == 200
    assert split_characters > 0, "no cut split a multi-byte character; change the body"


def test_half_truncation_fails_as_unreadable_not_checksum(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, realistic_body())
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    assert caught.value.detail.startswith("checkpoint unreadable:")
    assert "checksum" not in caught.value.detail


def test_flipped_byte_in_body_is_checksum_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, realistic_body())
    raw = path.read_bytes()
    # "Parser" occurs only inside the body string; changing one letter keeps the JSON valid.
    at = raw.index(b"Parser")
    assert raw.count(b"Parser") == 1
    damaged = raw[:at] + b"Q" + raw[at + 1 :]
    json.loads(damaged)
    path.write_bytes(damaged)
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    assert caught.value.detail == "checkpoint checksum mismatch"


def rewrite_frame(path: Path, **changes: Any) -> None:
    frame = json.loads(path.read_bytes())
    frame.update(changes)
    path.write_text(json.dumps(frame, ensure_ascii=False), encoding="utf-8")


def test_a_newer_schema_version_is_refused_as_newer_naming_both_overnights(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, realistic_body())
    # A newer frame may drop or change every other field: the version is read first.
    frame = json.loads(path.read_bytes())
    path.write_text(
        json.dumps(
            {
                "kind": frame["kind"],
                "schema_version": SCHEMA_VERSION + 1,
                "written_by": "9.4.0",
                "state": {"elsewhere": True},
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(NewerFormat) as caught:
        load_checkpoint(path)
    assert caught.value.problem == (
        f"{path} was written by overnight 9.4.0 (checkpoint format {SCHEMA_VERSION + 1}); "
        f"this is overnight {WRITTEN_BY} (format {SCHEMA_VERSION}): upgrade to resume"
    )


def test_a_newer_frame_without_its_writer_still_names_the_formats(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, realistic_body())
    rewrite_frame(path, schema_version=SCHEMA_VERSION + 1, written_by=None)
    with pytest.raises(
        NewerFormat, match=f"a newer overnight \\(checkpoint format {SCHEMA_VERSION + 1}"
    ):
        load_checkpoint(path)


@pytest.mark.parametrize("version", [0, -1, "2", 1.0, None])
def test_a_schema_version_never_written_is_corrupt(tmp_path: Path, version: object) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, realistic_body())
    rewrite_frame(path, schema_version=version)
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    assert caught.value.detail == (
        f"checkpoint schema version {version!r}, this overnight reads {SCHEMA_VERSION}"
    )


def test_the_frame_names_the_overnight_that_wrote_it(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, realistic_body())
    frame = json.loads(path.read_bytes())
    assert (frame["schema_version"], frame["written_by"]) == (SCHEMA_VERSION, WRITTEN_BY)


def test_boolean_schema_version_is_not_version_one(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, realistic_body())
    rewrite_frame(path, schema_version=True)
    with pytest.raises(CheckpointCorrupt, match="schema version True"):
        load_checkpoint(path)


def test_wrong_kind_is_refused_naming_versions(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, realistic_body())
    rewrite_frame(path, kind="someone-elses-state")
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    detail = caught.value.detail
    assert "someone-elses-state" in detail
    assert f"schema version {SCHEMA_VERSION}, this overnight reads {SCHEMA_VERSION}" in detail


def hand_built_frame(body_text: str) -> dict[str, Any]:
    return {
        "kind": "overnight-checkpoint",
        "schema_version": SCHEMA_VERSION,
        "sha256": hashlib.sha256(body_text.encode("utf-8")).hexdigest(),
        "body": body_text,
    }


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(b"", "checkpoint unreadable:", id="empty"),
        pytest.param(b"\xff\xfe{}", "checkpoint unreadable:", id="not-utf8"),
        pytest.param(b"not json at all", "checkpoint unreadable:", id="not-json"),
        pytest.param(b"[1, 2, 3]", "checkpoint unreadable: expected a frame", id="not-a-frame"),
        pytest.param(
            b'{"kind": "overnight-checkpoint", "schema_version": 1}',
            "checkpoint unreadable: frame lacks sha256, body",
            id="missing-keys",
        ),
        pytest.param(
            json.dumps({**hand_built_frame("{}"), "body": {"queue": []}}).encode(),
            "checkpoint unreadable: body and sha256 must be strings",
            id="body-not-a-string",
        ),
        pytest.param(
            json.dumps(hand_built_frame("[1, 2]")).encode(),
            "checkpoint body is not a JSON object",
            id="body-a-list",
        ),
        pytest.param(
            json.dumps(hand_built_frame("{unquoted: 1}")).encode(),
            "checkpoint body is not JSON",
            id="body-not-json",
        ),
        pytest.param(
            json.dumps({**hand_built_frame("{}"), "body": "\ud800"}).encode(),
            "checkpoint checksum mismatch",
            id="lone-surrogate",
        ),
    ],
)
def test_damaged_files_are_refused_by_name(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_bytes(content)
    with pytest.raises(CheckpointCorrupt) as caught:
        load_checkpoint(path)
    assert caught.value.detail.startswith(expected)


def test_directory_in_place_of_file_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    path.mkdir()
    with pytest.raises(CheckpointCorrupt, match="checkpoint unreadable"):
        load_checkpoint(path)


def test_well_formed_but_wrong_body_loads(tmp_path: Path) -> None:
    # The honest limit: the checksum only covers what happened after serialization. A body
    # that was already wrong when saved (here a queue emptied by some bug) loads cleanly.
    path = tmp_path / "checkpoint.json"
    wrong = json.dumps({"queue": [], "done": []}, sort_keys=True)
    path.write_text(json.dumps(hand_built_frame(wrong)), encoding="utf-8")
    assert load_checkpoint(path) == {"queue": [], "done": []}


def test_save_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    for step in range(5):
        save_checkpoint(path, {**realistic_body(), "step": step})
    assert os.listdir(tmp_path) == ["checkpoint.json"]
    assert load_checkpoint(path) == {**realistic_body(), "step": 4}


def test_replace_is_whole_readers_see_old_or_new(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    old = {**realistic_body(), "generation": "old"}
    new = {"generation": "new", "queue": []}
    save_checkpoint(path, old)
    old_inode = path.stat().st_ino
    with open(path, "rb") as reader_of_old:
        save_checkpoint(path, new)
        # A reader that opened before the save still reads the complete old checkpoint...
        old_frame = json.loads(reader_of_old.read())
    assert json.loads(old_frame["body"]) == old
    # ...and one that opens after reads the complete new one, a different file.
    assert load_checkpoint(path) == new
    assert path.stat().st_ino != old_inode


def test_save_under_a_regular_file_fails_plainly(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("I am a file", encoding="utf-8")
    with pytest.raises(NotADirectoryError):
        save_checkpoint(blocker / "checkpoint.json", realistic_body())
    assert os.listdir(tmp_path) == ["not-a-directory"]


def test_failed_rename_removes_the_temporary_file(tmp_path: Path) -> None:
    # A directory at the target name lets the temporary file be written, then makes the
    # rename fail: the cleanup path runs for real.
    path = tmp_path / "checkpoint.json"
    path.mkdir()
    with pytest.raises(IsADirectoryError):
        save_checkpoint(path, realistic_body())
    assert os.listdir(tmp_path) == ["checkpoint.json"]
    assert os.listdir(path) == []


def test_unserializable_body_fails_before_touching_disk(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    save_checkpoint(path, {"generation": 1})
    with pytest.raises(TypeError):
        save_checkpoint(path, {"generation": 2, "when": object()})
    assert os.listdir(tmp_path) == ["checkpoint.json"]
    assert load_checkpoint(path) == {"generation": 1}
