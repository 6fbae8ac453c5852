"""Parameters, forward FLOPs and kept activations of an encoder's side groups
(`modelplan.specs.encoder_side`), keyed `side/<name>` under `embedding/` or a block."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.encoder_side import SideOp
    from modelplan.specs.transformer import TransformerSpec


def _ops(spec: "TransformerSpec", where: str) -> "list[SideOp]":
    side = spec.extras.side if spec.extras is not None else None
    return getattr(side, where) if side is not None else []


def side_params(spec: "TransformerSpec", where: str) -> dict[str, int]:
    """Parameters of the `where` ('embedding', 'block' or 'head') groups."""
    out: dict[str, int] = {}
    for op in _ops(spec, where):
        out[f"side/{op.name}"] = out.get(f"side/{op.name}", 0) + op.params
    return out


def side_flops(spec: "TransformerSpec", where: str, tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of the `where` groups over `tokens` tokens in sequences of `seq_len`: 2 a
    multiply-add (torch.utils.flop_counter's mm / bmm convention); a per-sequence group on
    tokens // seq_len rows."""
    out: dict[str, int] = {}
    for op in _ops(spec, where):
        rows = tokens // seq_len if op.per_sequence else tokens
        out[f"side/{op.name}"] = out.get(f"side/{op.name}", 0) + 2 * rows * (op.macs + op.macs_per_key * seq_len)
    return out


def side_kept_elements(spec: "TransformerSpec") -> int:
    """Activation elements per token one block's groups keep for backward."""
    return sum(op.kept for op in _ops(spec, "block"))
