"""hoodline benchmarks against peers and the machine's limits (not part of the default tests).

Run one with ``PYTHONPATH=src .venv/bin/python -m bench.<name> [--scale ...]`` from the
repository root, or ``bench/run.py <name> ...``. Results and exact commands: ``BENCHMARKS.md``.
"""
