"""The LLM agent for one task: a ReAct loop with tools, per-task limits, prompt caching that is
measured rather than assumed, compaction, and lessons carried between tasks."""
