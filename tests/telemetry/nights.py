"""A night worth exporting: one agent task that fails its first attempt and passes its
second, with real tools, real git, and a scripted model billed with real usage fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overnight.messages.types import ModelRequest
from overnight.testing import ScriptedModel
from overnight.testing.fakes import text_answer, tool_answer, usage_dict
from tests.helpers.nights import make_repo, make_spec

#: Strings that are content: none of them may leave the machine unless content is asked for.
PROMPT_MARK = "PROMPT-MARK-QUOKKA-7731"
TOOL_OUTPUT_MARK = "TOOL-OUTPUT-ZEBRA-4412"
ANSWER_MARK = "ANSWER-MARK-OKAPI-9023"
SECRET_NAME = "TELEMETRY_TEST_API_KEY"
SECRET = "sk-test-9f8e7d6c5b4a39281706"

#: How long the agent's one command takes (seconds): its span must last as long.
SLEEP_S = 0.4

#: The usage each execute call is billed: uncached, cache reads and writes, output.
USAGE = {"input": 1200, "output": 80, "cache_read": 300, "cache_write_5m": 50}


def night_repo(root: Path) -> Path:
    return make_repo(
        root / "repo",
        {
            "README.md": "a repository\n",
            "notes.txt": f"{TOOL_OUTPUT_MARK}\nthe key is {SECRET}\n",
        },
    )


def scripted_model() -> ScriptedModel:
    """Attempt 1 answers at once (its verify fails); attempt 2 reads notes.txt, writes
    done.txt, runs a command that takes ``SLEEP_S`` seconds and says it is done."""
    turns: list[dict[str, Any]] = [
        text_answer(f"not yet {ANSWER_MARK}", usage_dict(**USAGE)),
        tool_answer("read_file", {"path": "notes.txt"}, usage_dict(**USAGE)),
        tool_answer(
            "write_file", {"path": "done.txt", "content": f"ok {SECRET}\n"}, usage_dict(**USAGE)
        ),
        tool_answer("run_command", {"command": f"sleep {SLEEP_S}"}, usage_dict(**USAGE)),
        text_answer(f"done {ANSWER_MARK} {SECRET}", usage_dict(**USAGE)),
    ]

    def execute(_request: ModelRequest) -> dict[str, Any]:
        return turns.pop(0) if turns else text_answer("nothing more", usage_dict(**USAGE))

    return ScriptedModel(execute=execute, summarize=f"closing summary {ANSWER_MARK}")


def night_spec(repo: Path, telemetry: dict[str, Any] | None = None) -> Any:
    sections: dict[str, Any] = {}
    if telemetry is not None:
        sections["telemetry"] = telemetry
    return make_spec(
        repo,
        predicate="test -f done.txt",
        tasks=[
            {
                "id": "write-done",
                "title": "write done.txt",
                "brief": f"{PROMPT_MARK}: read notes.txt, then write done.txt ({SECRET}).",
                "verify": "test -f done.txt",
            }
        ],
        tools={
            "allow": ["read_file", "write_file", "run_command"],
            "commands": ["true", "false", "test", "sleep"],
        },
        **sections,
    )
