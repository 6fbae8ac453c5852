"""The numpy executor for generic networks (MLP, CNN, RNN): layers, a single-device reference
and the per-rank (data, pipeline, tensor parallel) program that `verify` compares with it.

Conventions (the house rules of `modelplan.execute`): float64; batch first, torch's layouts for
activations ((N, C, H, W) images, (N, seq, features) sequences); weights stored with the input
dimensions first and the output last, so every matmul is `y = x @ w` (Linear (in, out), Conv
(C_in/groups, *kernel, C_out), LSTM weight_ih (in, 4h)); column-parallel splits the last dim,
row-parallel dim 0. Each leaf is a `*_forward -> (y, Saved)` / `*_backward(Saved, dy)` pair and
`Saved` lists what it keeps for backward, so the executor can count its activation memory.
"""
