"""Exact parameter counts, FLOPs and memory from a model spec (pure functions, Python ints)."""
