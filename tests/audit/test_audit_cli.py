"""``overnight audit RUN`` as a process: one line per check, exit 0 when everything agrees and
3 naming each disagreement, 64 for what is not a finished run, ``--json`` and ``--no-rerun``,
and a run id instead of a path."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from overnight.audit.findings import Audit
from tests.audit.nights import copy_run, result_of, rewrite_result, work_night
from tests.helpers.kills import overnight
from tests.helpers.nights import cli_env


def audit_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        overnight("audit", *args), env=cli_env(), capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return work_night(tmp_path)


def verdicts(stdout: str) -> dict[str, str]:
    """name -> verdict, from the check lines (name, verdict, detail)."""
    found: dict[str, str] = {}
    for line in stdout.splitlines():
        for verdict in ("ok", "DISAGREES"):
            name, sep, _rest = line.partition(f"  {verdict}  ")
            if sep:
                found[name.strip()] = verdict
                break
    return found


def test_an_untouched_run_exits_0_with_every_check_ok(run: Path) -> None:
    done = audit_cli(run)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = verdicts(done.stdout)
    assert lines and set(lines.values()) == {"ok"}
    assert "verify a1" in lines and "spend.total_usd" in lines and "effects" in lines
    assert done.stdout.splitlines()[-1].endswith(f"all {len(lines)} checks agree")


def test_a_tampered_run_exits_3_naming_each_disagreement(run: Path, tmp_path: Path) -> None:
    forged = copy_run(run, tmp_path / "forged")
    data = result_of(forged)
    data["spend"]["total_usd"] = 0.0
    data["effects"] = []
    rewrite_result(forged, data)
    done = audit_cli(forged, "--no-rerun")
    assert done.returncode == 3
    lines = verdicts(done.stdout)
    assert {n for n, v in lines.items() if v == "DISAGREES"} == {"spend.total_usd", "effects"}
    last = done.stdout.splitlines()[-1]
    assert "2 of" in last and "spend.total_usd, effects" in last


def test_json_is_the_whole_audit(run: Path, tmp_path: Path) -> None:
    forged = copy_run(run, tmp_path / "forged")
    data = result_of(forged)
    data["stop_reason"] = "QUEUE_EMPTY_GOAL_UNMET"
    rewrite_result(forged, data)
    done = audit_cli(forged, "--json", "--no-rerun")
    assert done.returncode == 3
    body = json.loads(done.stdout)
    audit = Audit.model_validate(body)
    assert body["kind"] == "overnight-audit" and audit.exit_code == 3 and not audit.agrees
    assert audit.run_id == data["run_id"] and audit.rerun is False
    assert all(c["kind"] == "audit_check" for c in body["checks"])
    assert {c["verdict"] for c in body["checks"]} == {"ok", "DISAGREES"}
    assert audit.disagreements[0] == "stop_reason"
    assert audit.recomputed.stop_reason == "GOAL_MET"
    assert audit.recomputed.total_usd == data["spend"]["total_usd"]


def test_no_rerun_runs_no_verify(run: Path) -> None:
    done = audit_cli(run, "--no-rerun")
    assert done.returncode == 0
    assert not [n for n in verdicts(done.stdout) if n.startswith("verify ")]
    assert "--no-rerun" in done.stdout
    with_rerun = audit_cli(run, "--json")
    checks = json.loads(with_rerun.stdout)["checks"]
    assert {c["name"] for c in checks if c["name"].startswith("verify ")} == {
        "verify a1",
        "verify a2",
        "verify a3",
        "verify c1",
    }


def test_a_run_id_is_taken_instead_of_a_path(run: Path) -> None:
    run_id = result_of(run)["run_id"]
    done = audit_cli(run_id, "--no-rerun")
    assert done.returncode == 0, done.stderr
    assert f"audit of {run_id}" in done.stdout


def test_what_is_not_a_run_directory_exits_64(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = audit_cli(plain)
    assert done.returncode == 64
    assert "not an overnight run directory" in done.stderr and done.stdout == ""


def test_a_run_with_no_result_exits_64(run: Path, tmp_path: Path) -> None:
    unfinished = copy_run(run, tmp_path / "unfinished")
    (unfinished / "result.json").unlink()
    done = audit_cli(unfinished)
    assert done.returncode == 64
    assert "no result.json" in done.stderr


def test_an_unknown_run_id_exits_64(run: Path) -> None:
    done = audit_cli("19990101-000000-000000")
    assert done.returncode == 64


def test_a_missing_sandbox_is_a_usage_error_that_names_no_rerun(run: Path, tmp_path: Path) -> None:
    """Where bubblewrap cannot run, re-running the verifies is refused (exit 64), never done
    outside the sandbox; --no-rerun still audits."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "python3", "sh", "prlimit"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    env = cli_env()
    env["PATH"] = str(bin_dir)
    args = overnight("audit", run)
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 64, done.stdout
    assert "--no-rerun" in done.stderr and "bubblewrap" in done.stderr
    quick = subprocess.run([*args, "--no-rerun"], env=env, capture_output=True, text=True)
    assert quick.returncode == 0, quick.stdout + quick.stderr


def test_the_demo_night_audits_clean_with_its_planned_tasks(tmp_path: Path) -> None:
    """A whole night through the CLI on the system clock: a planned queue (model-written
    verifies, run again as plain words), prompt caching, replans and a closing summary."""
    demo = subprocess.run(
        overnight("demo", "--dir", tmp_path / "demo", "--quiet"),
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    done = audit_cli(tmp_path / "demo" / "run", "--json")
    audit = Audit.model_validate_json(done.stdout)
    assert done.returncode == 0 and audit.agrees, [c for c in audit.checks if not c.agrees]
    assert [c.name for c in audit.checks if c.name.startswith("verify ")] == [
        "verify fix_words",
        "verify fix_ties",
    ]
