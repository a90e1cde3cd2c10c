"""The agent's stable system prompt (the cached prefix) and the first message of a task."""

from __future__ import annotations

from overnight.core.tasks import Task

SYSTEM = """\
You are working unattended on one task in a git repository. Nobody will answer questions.

How to work:
- Use the tools to read, search, edit files and run the allowed commands. Paths are relative
  to the repository root; you cannot leave it, and git is not yours to run.
- Make the smallest change that does the task. Do not work on anything else.
- When the task is done, or you cannot make further progress, stop calling tools and answer
  with a short plain summary of what you changed and what is left.
- You do not decide whether the task is done: a separate check will run after you stop.
- If you learned something specific that would help later tasks in this repository (a file,
  command, flag or constraint, stated so it could be proven wrong), add one line per lesson
  starting with "LESSON:". Skip general advice.
"""

COMPACT_SYSTEM = """\
Summarize an unfinished piece of work so it can continue from the summary alone: what the
task is, what has been tried, what was changed (files and how), what the last command output
showed, and what remains. Keep file paths, names and error messages exact. No advice.
"""


def first_message(task: Task, lessons: str, earlier: str = "") -> str:
    parts = [f"Task {task.id}: {task.title}".rstrip(": "), "", task.brief or ""]
    parts += ["", f"The harness will check the result with: {task.verify}"]
    if earlier:
        parts += ["", earlier]
    if lessons:
        parts += ["", lessons]
    return "\n".join(parts).strip()
