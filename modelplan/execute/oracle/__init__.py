"""Oracles for `verify`: what one device computes for the same training run, step by step.

An oracle takes the executor's initial weights (full tensors, executor layout and names), the
batches of every step and the optimizer, and returns each step's loss, every gradient and every
updated parameter (`OracleRun`). Two exist:

- `numpy`: the executor's own single-device reference (`execute/reference.py`,
  `execute/net/model.py`) looped over the steps. It shares the layer functions with the sharded
  run, so it proves the sharding, not the layer math.
- `torch`: the same model rebuilt in PyTorch float64 from the spec alone, with torch's own
  functions and modules (scaled_dot_product_attention, rms_norm / layer_norm, embedding,
  cross_entropy, nn.Conv2d / nn.LSTM ...), autograd and `torch.optim` with torch's LR schedulers.
  It shares nothing with the executor but the weights and the data, so it also proves the math.
  It needs the optional `torch` extra and is imported only when asked for.
"""

from modelplan.execute.oracle.result import OracleKind, OracleRun, OracleStep, OracleUnavailable, oracle_note, require_torch
from modelplan.execute.oracle.run import check_oracle, run_oracle

__all__ = ["OracleKind", "OracleRun", "OracleStep", "OracleUnavailable", "check_oracle", "oracle_note", "require_torch", "run_oracle"]
