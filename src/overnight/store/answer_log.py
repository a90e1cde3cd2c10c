"""Every model answer of a run in full, in ``answers.jsonl``: what ``overnight replay`` answers
from. One line per answered call: the request's digest (and the request itself when small),
and the response (content blocks, tool calls and their inputs, usage, stop reason).

Redacted like the trace (secret values never reach it) and size-capped: a record over
``MAX_RECORD_BYTES`` keeps only the request's digest and says the answer was too large to
keep, and past ``MAX_FILE_BYTES`` nothing more is recorded. The run's own names (its
directory, its workspace, its id and branch) are written as placeholders, so that a replay
under other names asks the same requests. Each request is keyed by its digest with the
durations commands print masked.

What the harness cuts to a length before a model sees it (a command's output, a check's) has
the run's places written relative or as placeholders before the cut (``overnight.core.places``),
so a replay under paths of any length is cut at the same place. Answers of format 1 were
recorded before that: they also hold ``name_lengths``, how long the run's own names were.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from overnight.core.errors import DiskFull
from overnight.messages.types import ModelRequest, ModelResponse
from overnight.secrecy import secret_values
from overnight.store.journal import Journal
from overnight.store.trace import redact, replaced

ANSWERS_VERSION = 2
#: The first format whose requests do not depend on how long the run's paths were.
PLACED_SINCE = 2
ANSWERS_FILE = "answers.jsonl"
MAX_RECORD_BYTES = 512_000
MAX_FILE_BYTES = 64_000_000


def placeholders(run_dir: Path, workspace: Path, run_id: str, branch: str) -> list[tuple[str, str]]:
    """The run's own names and what they are written as, longest first."""
    pairs = [
        (str(run_dir.absolute()), "<run-dir>"),
        (str(workspace.absolute()), "<workspace>"),
        (branch, "<branch>"),
        (run_id, "<run-id>"),
    ]
    return sorted((p for p in pairs if p[0]), key=lambda p: -len(p[0]))


def normalized(value: Any, names: Sequence[tuple[str, str]]) -> Any:
    """``value`` with the run's own names written as their placeholders."""
    return replaced(value, names)


def request_record(
    request: ModelRequest, names: Sequence[tuple[str, str]], secrets: list[str]
) -> dict[str, Any]:
    """The request as recorded and compared: redacted, the run's names as placeholders."""
    data: dict[str, Any] = normalized(redact(request.model_dump(mode="json"), secrets), names)
    return data


def digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


#: What no two runs of a command print alike: the time it took (``0.8 s``, ``in 0.007s``).
DURATION = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s)\b")


def masked(value: Any) -> Any:
    """``value`` with every duration masked."""
    if isinstance(value, str):
        return DURATION.sub("<duration>", value)
    if isinstance(value, dict):
        return {k: masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def request_key(request: dict[str, Any]) -> str:
    """What a recorded and a replayed request are compared by: the digest of the request as
    recorded, durations masked."""
    return digest(masked(request))


class AnswerRecorder:
    """Appends one record per answered model call to the run's ``answers.jsonl``."""

    def __init__(self, path: Path, names: Sequence[tuple[str, str]]) -> None:
        self.path = path
        self.names = list(names)
        self._secrets = secret_values()
        self._bytes = path.stat().st_size if path.exists() else 0
        self.calls = 0
        self.full = False

    def record(self, request: ModelRequest, response: ModelResponse) -> None:
        self.calls += 1
        if self.full:
            return
        req = request_record(request, self.names, self._secrets)
        res = normalized(redact(response.model_dump(mode="json"), self._secrets), self.names)
        record: dict[str, Any] = {
            "kind": "answer",
            "version": ANSWERS_VERSION,
            "n": self.calls,
            "purpose": request.purpose,
            "request_key": request_key(req),
            "request": req,
            "response": res,
        }
        size = len(json.dumps(record))
        if size > MAX_RECORD_BYTES:
            record.update(request=None, response=None, too_large=size)
        if self._bytes + size > MAX_FILE_BYTES:
            self.full = True
            record = {"kind": "answers_full", "n": self.calls, "limit_bytes": MAX_FILE_BYTES}
        try:
            journal = Journal(self.path, durable=False)
            try:
                journal.append(record)
            finally:
                journal.close()
            self._bytes += size
        except (OSError, DiskFull):
            self.full = True  # evidence, not state: a run never fails for it
