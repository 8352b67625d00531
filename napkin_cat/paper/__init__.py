"""Layer 8, paper: the paper reproduced end to end, one checkable claim at a time (``napkin reproduce``).

Each section module records claims in a :class:`~napkin_cat.paper.ledger.Ledger`: the value the
paper prints beside the value the library computes through its functors, with a status
(reproduced / erratum / differs); :mod:`napkin_cat.paper.report` writes ``report.md`` and
``report.json``.

May import: every layer (it sits beside the CLI, at the top).
"""
