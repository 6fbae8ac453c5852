"""The numpy executor: a single-device reference model, the same model sharded over simulated
ranks (tensor, sequence, pipeline, data, ZeRO and expert parallelism) and `verify`, which checks
that both agree and that the plan's communication and memory figures match what was done.

numpy lives here (and only here); every array is float64 unless a caller asks otherwise.
"""
