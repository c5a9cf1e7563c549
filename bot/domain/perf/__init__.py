"""Benchmarks' series: where a metric shifted, by how much, and how sure (pure: values in, values out)."""
