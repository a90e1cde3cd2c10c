"""Codex CLI as a night's executor: ``codex exec --json`` headless, in the sandbox, behind
the metering proxy.

It needs no login: a model provider of its own (``-c model_providers.overnight``) points it
at the bridge (the OpenAI Responses API) and reads its key, the task's one-time token, from
``OVERNIGHT_MODEL_TOKEN``. Its own sandbox and approvals are off
(``--dangerously-bypass-approvals-and-sandbox``): ours is the fence, and nobody is there to
approve. Its home (``CODEX_HOME``) is made in the private one; update checks and analytics
are off, and no session is kept (``--ephemeral``). It takes no turn limit.
"""

from __future__ import annotations

import json

from overnight.executors.runner import CliExecutor, Endpoint, Launch

PROVIDER = "overnight"

#: Starts the command after making its ``CODEX_HOME`` (Codex CLI wants it to exist).
_MAKE_HOME = 'mkdir -p "$CODEX_HOME" && exec "$@"'


def _toml(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these)."""
    return json.dumps(value)


class CodexExecutor(CliExecutor):
    kind = "codex"

    def launch(self, prompt: str, endpoint: Endpoint) -> Launch:
        provider = (
            f"{{name = {_toml('overnight')}, base_url = {_toml(endpoint.openai)}, "
            f'env_key = "OVERNIGHT_MODEL_TOKEN", wire_api = "responses", '
            f"request_max_retries = 0, stream_max_retries = 0}}"
        )
        argv = [
            "/bin/sh",
            "-c",
            _MAKE_HOME,
            "codex",
            str(self.found.program),
            "exec",
            "--json",
            "--color",
            "never",
            "--skip-git-repo-check",
            "--ephemeral",
            "--dangerously-bypass-approvals-and-sandbox",
            "--model",
            endpoint.model,
            "-c",
            f"model_provider={_toml(PROVIDER)}",
            "-c",
            f"model_providers.{PROVIDER}={provider}",
            "-c",
            "check_for_update_on_startup=false",
            "-c",
            "analytics.enabled=false",
            "-c",
            "feedback.enabled=false",
            # Web search is a server tool billed per use; the proxy forwards only what the
            # spec prices, so Codex is not offered it.
            "-c",
            'web_search="disabled"',
            "--",
            prompt,
        ]
        env = {"CODEX_HOME": f"{endpoint.home}/.codex"}
        return Launch(argv=argv, env=env)


__all__ = ["CodexExecutor"]
