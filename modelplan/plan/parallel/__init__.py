"""One module per parallelism, each with what it adds to a training step (the calls of the
communication list, as `parallel.calls.RankCalls`), what it shards, and how its traffic overlaps
compute: `tp` (with `sp`), `cp`, `ep`, `pp`, `dp_zero`. The communication list
(`plan/commlist.py`) and the evaluator (`plan/evaluator.py`) only sum them over a plan."""
