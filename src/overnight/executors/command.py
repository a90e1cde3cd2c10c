"""Any CLI agent as a night's executor (``kind = "command"``): the spec's command line, in
the sandbox, behind the metering proxy.

The word ``{prompt}`` in the command is replaced by the task's prompt (else the prompt is its
standard input), ``{model}`` by the model. Its model's base URL and token arrive in the
variables of its API (``ANTHROPIC_BASE_URL``/``ANTHROPIC_API_KEY``, or
``OPENAI_BASE_URL``/``OPENAI_API_KEY``, the latter with ``/v1``) and in
``OVERNIGHT_MODEL_BASE_URL``/``OVERNIGHT_MODEL_TOKEN``/``OVERNIGHT_MODEL``. Its output is
kept and its last lines are its final message; it has no events to read.

mini-swe-agent is the example (its model through litellm, which speaks Chat Completions to
``OPENAI_BASE_URL``)::

    [executor]
    kind = "command"
    api = "openai-chat"
    command = ["env", "LITELLM_LOCAL_MODEL_COST_MAP=True", "MSWEA_COST_TRACKING=ignore_errors",
               "MSWEA_CONFIGURED=true", "mini", "--yolo", "--exit-immediately", "--cost-limit", "0",
               "--model", "openai/{model}", "--task", "{prompt}"]

    [sandbox]
    readable = ["path/to/its/virtualenv"]   # when it lies where the sandbox hides (a home)

(litellm's price list from its package rather than a download; its own cost tracking lenient
with a model name it does not know; its first-run set-up questions skipped; no cost limit of
its own: the harness's budget is the limit.) The sandbox shows the command's program file
itself; the environment or tree it runs from must be visible already (a toolchain on ``PATH``,
the system's, ``[sandbox] readable``).
"""

from __future__ import annotations

from overnight.executors.runner import CliExecutor, Endpoint, Launch


class CommandExecutor(CliExecutor):
    kind = "command"

    def launch(self, prompt: str, endpoint: Endpoint) -> Launch:
        assert self.spec.command
        words = list(self.spec.command)
        words[0] = str(self.found.path)
        argv = [w.replace("{prompt}", prompt).replace("{model}", endpoint.model) for w in words]
        given = any("{prompt}" in w for w in self.spec.command)
        if self.api == "anthropic":
            env = {"ANTHROPIC_BASE_URL": endpoint.root, "ANTHROPIC_API_KEY": endpoint.token}
        else:
            env = {"OPENAI_BASE_URL": endpoint.openai, "OPENAI_API_KEY": endpoint.token}
        return Launch(argv=argv, env=env, stdin=None if given else prompt.encode())


__all__ = ["CommandExecutor"]
