"""Single-device numpy layers with hand-written backward passes.

Each layer is a pair `*_forward(...) -> (y, cache)` / `*_backward(cache, dy, ...) -> (dx, grads)`.
Weights are `(in, out)` with `y = x @ w`; activations are `(batch, seq, features)`. Caches hold
activations only (never weights), so ZeRO-3 can free and re-gather weights between the passes.
"""
