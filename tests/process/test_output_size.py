"""Command output is never held whole by the harness: it is redacted in chunks (a secret split
between two chunks is still caught) and read back as a bounded tail, so the harness's memory
does not grow with what a command prints."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overnight.process import REDACT_CHUNK, redact_stream, run_command

SECRET = "sk-ant-api03-SIZE-CANARY-41d7c0"


def _redacted(data: bytes, secrets: list[str], chunk: int) -> tuple[bytes, bool]:
    out = io.BytesIO()
    found = redact_stream(io.BytesIO(data), out, secrets, chunk=chunk)
    return out.getvalue(), found


@settings(max_examples=500, deadline=None)
@given(
    st.binary(max_size=60),
    st.integers(min_value=0, max_value=4),
    st.integers(min_value=1, max_value=12),
)
def test_chunked_redaction_equals_redacting_the_whole(
    filler: bytes, copies: int, chunk: int
) -> None:
    secret = "SECRET-VALUE-1"
    data = filler + b"".join(secret.encode() + filler[: copies * 3] for _ in range(copies))
    out, found = _redacted(data, [secret], chunk)
    assert out == data.replace(secret.encode(), b"[redacted]")
    assert found is (secret.encode() in data)


@settings(max_examples=500, deadline=None)
@given(st.text("ab", max_size=40), st.integers(min_value=1, max_value=9))
def test_chunked_redaction_of_self_overlapping_secrets(text: str, chunk: int) -> None:
    secrets = ["aabaab", "abab"]
    data = text.encode()
    expected = data.replace(b"aabaab", b"[redacted]").replace(b"abab", b"[redacted]")
    assert _redacted(data, secrets, chunk)[0] == expected


def test_a_secret_split_across_every_chunk_boundary_is_caught() -> None:
    data = b"x" * 37 + SECRET.encode() + b"y" * 11
    for chunk in range(1, len(data) + 1):
        out, found = _redacted(data, [SECRET, "another-secret"], chunk)
        assert found, chunk
        assert out == b"x" * 37 + b"[redacted]" + b"y" * 11, chunk


def test_a_command_log_split_at_the_chunk_boundary_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    before = REDACT_CHUNK - len(SECRET) // 2  # the key straddles the first chunk's end
    script = f"import sys; sys.stdout.write('x' * {before} + {SECRET!r} + 'tail')"
    log = tmp_path / "out.log"
    result = run_command([sys.executable, "-c", script], cwd=tmp_path, timeout_s=60, log_path=log)
    data = log.read_bytes()
    assert SECRET.encode() not in data
    assert data == b"x" * before + b"[redacted]" + b"tail"
    assert result.output.endswith("[redacted]tail")


def test_harness_memory_stays_bounded_under_a_flood_of_output(tmp_path: Path) -> None:
    # 200 MB of output, with a secret in the environment (so the log is redacted), then a
    # file of one 200 MB line read with read_file: the peak resident size of the process
    # running them stays far below either size.
    size = 200 * 1000 * 1000
    code = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        os.environ["ANTHROPIC_API_KEY"] = {SECRET!r}
        from overnight.process import run_command
        from overnight.seams import ToolContext
        from overnight.tools.run_command import RunCommandTool
        from overnight.tools.files import ReadFileTool
        work = Path(sys.argv[1])
        result = run_command(
            "yes {SECRET} | head -c {size}", cwd=work, timeout_s=600,
            log_path=work / "flood.log", max_output=8000,
        )
        assert len(result.output) <= 8000, len(result.output)
        assert "[redacted]" in result.output and {SECRET!r} not in result.output
        tool = RunCommandTool(["head"], max_output_chars=8000)
        ctx = ToolContext(root=work, artifacts=work / "artifacts", call_id="flood")
        out = tool.run({{"command": "head -c {size} /dev/zero"}}, ctx)
        assert out.artifact is not None and len(out.content) < 9000, len(out.content)
        fill = f"head -c {size} /dev/zero | tr '\\\\0' a > one-line.txt"
        run_command(fill, cwd=work, timeout_s=600)
        read = ReadFileTool().run({{"path": "one-line.txt"}}, ctx)
        assert f"line cut: {size} characters" in read.content, read.content[-200:]
        print(os.path.getsize(work / "flood.log"))
        # VmHWM: this process's own peak since its exec. (ru_maxrss would also count the
        # parent's resident size at the fork, which a long test session makes large.)
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
        print(int(hwm[0].split()[1]))
        """
    )
    src = Path(__file__).resolve().parents[2] / "src"
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    logged, peak_kib = (int(x) for x in done.stdout.split())
    line = len(SECRET) + 1
    # Every whole line's key was redacted, and nothing else was lost.
    assert logged == size // line * len("[redacted]\n") + size % line
    assert peak_kib * 1024 < 120 * 1000 * 1000, f"peak RSS {peak_kib} KiB"
