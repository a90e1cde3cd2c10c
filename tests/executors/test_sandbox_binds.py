"""What the sandbox shows a CLI beyond a command's usual view: the proxy's unix socket, bound
at its own path from a place the sandbox hides, that the sandbox's uid can connect to, and
nothing beside it; and still never a directory through ``files``. (The CLIs' installations,
bound file by file, are shown by the CLIs' own tests running.)"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

import pytest

from overnight.config.sandbox import SandboxSpec
from overnight.process import WithAdditions, run_command
from overnight.sandbox import build_sandbox
from tests.helpers.sandbox import require_bwrap


def test_a_socket_in_a_hidden_place_is_reachable_and_nothing_beside_it(tmp_path: Path) -> None:
    require_bwrap()
    hidden = tmp_path / "proxy"
    hidden.mkdir()
    os.chmod(hidden, 0o711)
    (hidden / "beside").write_text("not for the sandbox\n")
    path = hidden / "model.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o666)
    server.listen(1)

    def serve() -> None:
        client, _ = server.accept()
        client.sendall(b"through the socket\n")
        client.close()

    threading.Thread(target=serve, daemon=True).start()
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    sandbox = build_sandbox(SandboxSpec(), sealed=[hidden])
    code = (
        "import os, socket; s = socket.socket(socket.AF_UNIX); "
        f"s.connect({str(path)!r}); print(s.recv(100).decode().strip()); "
        f"print(sorted(os.listdir({str(hidden)!r}))); print(os.getuid())"
    )
    confine = WithAdditions(sandbox, {"EXTRA": "1"}, (path,))
    try:
        ran = run_command([sys.executable, "-c", code], cwd=worktree, timeout_s=30, confine=confine)
    finally:
        server.close()
    assert ran.exit_code == 0, ran.output
    said = ran.output.splitlines()
    assert said[0] == "through the socket"
    assert said[1] == "['model.sock']"
    assert said[2] == str(sandbox.identity.uid)


def test_files_are_never_a_directory(tmp_path: Path) -> None:
    require_bwrap()
    sandbox = build_sandbox(SandboxSpec(), sealed=[])
    with pytest.raises(ValueError, match="neither a regular file nor a unix socket"):
        sandbox.command(["true"], cwd=tmp_path, files=[tmp_path])
