"""A night driven by this process: the lap and its loop (``night.py``), the planner, the
worktree, the run set-up and resume (``runs.py``), the closing (``finish.py``)."""
