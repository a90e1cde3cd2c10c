"""The renderings of what a run hands back (``result.json``, ``overnight.store.result``): the
report, in Markdown and HTML, and the pull request's title and body."""
