"""Smoke versions of the benchmarks in ``bench/`` (tiny scale; consistency, never timings)."""
