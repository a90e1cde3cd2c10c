"""A scripted model for the example: it judges drift and writes the closing summary with
realistic token usage, so the ledger has real numbers to price. No network, no key."""

from overnight.testing import ScriptedModel, usage_dict

model = ScriptedModel(
    drift={
        "reasoning": "Every queued task applies one of the migrations the goal names.",
        "off_goal_task_ids": [],
        "drift_score": 0.04,
    },
    summarize=(
        "All four migrations were applied and verified one by one, each in its own commit, "
        "and the schema check passes. Nothing was parked."
    ),
    usage=usage_dict(input=1800, output=240),
)
