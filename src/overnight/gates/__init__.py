"""A repository's own checks, read as findings: which a candidate adds over its base commit.

``readers`` turns a linter's or type checker's output into findings; ``suppressions`` finds
the comments that silence a check; ``manifests`` names a change to a dependency manifest;
``discovery`` finds the checks a repository configures, for ``overnight init``.
"""
