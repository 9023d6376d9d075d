"""The benchmarks: each module with a ``main`` runs as ``python -m bench.NAME``.

``make bench`` runs them all (``bench/run.py``); their figures, with the command
that printed them, are in ``docs/benchmarks.md``. ``support`` is what they share;
a module whose name starts with ``_`` is a helper of one benchmark.
"""
