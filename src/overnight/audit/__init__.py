"""``overnight audit RUN``: a third party's check of a morning report.

Everything ``result.json`` claims is recomputed from the run's raw files (the checkpoint and
its journal, the spend journal, the trace, the effects ledger, ``run.json``, ``spec.json``,
``gates.json`` and the gates' raw outputs) and from the repository, then compared with the
claim: the stop reason (``stop``), the money (``money``), the work on the branch (``work``),
the repository's own checks (``gates``) and the external effects (``effects``).
``overnight.audit.run.audit_run`` does it; ``overnight.audit.audit_text`` prints it.
"""
