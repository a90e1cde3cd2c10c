"""The note ``overnight run`` prints when the workspace holds uncommitted changes: what the
night will see (the spec and the model's files, which the harness reads from your checkout
now) and what it will not (everything else: the night's worktree starts from the committed
HEAD)."""

from __future__ import annotations

from pathlib import Path

from overnight.config.spec import Spec
from overnight.night import worktree as ws


def harness_reads(spec: Spec, spec_path: Path) -> dict[Path, str]:
    """The files the harness itself reads from the user's checkout, with what each is."""
    base = Path(spec.base_dir)
    found = {spec_path.resolve(): "the spec"}
    model = spec.model
    target = getattr(model, "target", None) if model is not None else None
    if target:
        module = target.partition(":")[0].replace(".", "/")
        for candidate in (base / f"{module}.py", base / module / "__init__.py"):
            found[candidate.resolve()] = "the model"
    script = getattr(model, "script", None) if model is not None else None
    if script:
        found[(base / str(script)).resolve()] = "the model's script"
    return found


def uncommitted_note(spec: Spec, spec_path: Path) -> str | None:
    """The note, or None when the checkout has nothing uncommitted."""
    repo = ws.check_repository(spec.workspace_path())
    paths = ws.uncommitted(repo)
    if not paths:
        return None
    reads = harness_reads(spec, spec_path)
    read = [f"{p} ({reads[(repo / p).resolve()]})" for p in paths if (repo / p).resolve() in reads]
    unseen = [p for p in paths if (repo / p).resolve() not in reads]
    head = ws.head(repo)[:12]
    said = f"overnight: note: {repo} has uncommitted changes ({_listed(paths)})."
    if read:
        said += f" The harness reads these from your checkout now, as they are: {_listed(read)}."
    if unseen:
        said += (
            f" The night starts from the committed HEAD ({head}) and will not see "
            f"{_listed(unseen)} (nor ignored files such as build outputs): commit what the "
            "agent and the checks need first."
        )
    else:
        said += f" The night's worktree and checks start from the committed HEAD ({head})."
    return said


def _listed(paths: list[str], limit: int = 5) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
