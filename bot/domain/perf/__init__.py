"""Benchmarks over CI runs: what each run read of a test's metrics, and where a series shifted."""
