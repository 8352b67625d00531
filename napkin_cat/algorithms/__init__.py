"""Layer 2, algorithms: functions placed on a memory hierarchy (paper §2.2-2.4, Appendix A.1).

The ``Kernel``, ``Grid`` and ``Stream`` bubbles (the paper's relabelings), the
partitions that introduce them (``kernel``, ``unfused``, ``group``, ``stream``) and
the streaming analysis that derives streamability from accumulators (the fusion theorem).

May import: :mod:`napkin_cat.errors` and :mod:`napkin_cat.syntax`.  How a region runs,
costs or draws is defined by the layers above (semantics, cost, render), not here.
"""
