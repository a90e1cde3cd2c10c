"""Replaying a recorded night offline: a model answering from the run's ``answers.jsonl``."""

from overnight.replay.model import Diverged, Divergence, ReplayModel
from overnight.replay.run import (
    Recording,
    ReplayReport,
    recording_of_run,
    render_replay,
    replay,
    save_recording,
    shipped_recording,
)

__all__ = [
    "Diverged",
    "Divergence",
    "Recording",
    "ReplayModel",
    "ReplayReport",
    "recording_of_run",
    "render_replay",
    "replay",
    "save_recording",
    "shipped_recording",
]
