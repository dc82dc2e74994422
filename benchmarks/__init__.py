"""Benchmarks and the example programs they measure (shared with the tests)."""
