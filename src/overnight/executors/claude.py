"""Claude Code as a night's executor: ``claude -p`` headless, in the sandbox, behind the
metering proxy.

Its model calls go to the bridge (``ANTHROPIC_BASE_URL``) with the task's one-time token as
its API key; every model it would pick by itself (the small fast one of its background work,
its subagents') is the spec's model, so that every call is one the night prices. Its
permission prompts are off (``--permission-mode bypassPermissions``): nobody is there to
answer them, and the sandbox is the fence. Its configuration lives in the private home
(``CLAUDE_CONFIG_DIR``), and no session is kept on disk.
"""

from __future__ import annotations

from overnight.executors.runner import CliExecutor, Endpoint, Launch

#: Its tools when the spec names none: reading, editing and running commands.
DEFAULT_TOOLS = ("Bash", "Edit", "Read", "Write")


class ClaudeCodeExecutor(CliExecutor):
    kind = "claude-code"

    def launch(self, prompt: str, endpoint: Endpoint) -> Launch:
        tools = self.spec.tools if self.spec.tools is not None else list(DEFAULT_TOOLS)
        argv = [
            str(self.found.program),
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--max-turns",
            str(self.spec.max_turns),
            "--model",
            endpoint.model,
            "--permission-mode",
            "bypassPermissions",
            "--no-session-persistence",
            "--tools",
            ",".join(tools),
        ]
        model = endpoint.model
        env = {
            "ANTHROPIC_BASE_URL": endpoint.root,
            "ANTHROPIC_API_KEY": endpoint.token,
            "CLAUDE_CONFIG_DIR": f"{endpoint.home}/.claude",
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_SMALL_FAST_MODEL": model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
            "CLAUDE_CODE_SUBAGENT_MODEL": model,
            # The sandbox: a harness that could not drop root still runs it there.
            "IS_SANDBOX": "1",
        }
        return Launch(argv=argv, env=env)


__all__ = ["DEFAULT_TOOLS", "ClaudeCodeExecutor"]
