"""Sub-specs of the side paths Gemma 3n adds around its attention + MLP blocks (transformers 5.24
modeling_gemma3n.py), each a field of TransformerSpec holding the sizes that change a count:

- AltUp (Baykal et al. 2023, "Alternating Updates for Efficient Transformers", NeurIPS;
  `Gemma3nTextAltUp`): the residual stream is `inputs` copies of width h; each block predicts all
  copies from a learned mix (prediction_coefs Linear(n, n^2) of a router Linear(h, n) over a
  normed copy), runs on the active copy only, then corrects the others (correction_coefs
  Linear(n, n), correct_output_scale (h)). The embeddings feed n - 1 Linear(h, h) projections, the
  head n - 1 unembedding Linear(h, h) before the copies are averaged.
- Per-layer inputs (`Gemma3nTextModel.embed_tokens_per_layer`, `per_layer_model_projection`): a
  second token table of `vocab` rows x (layers x width) and a Linear(h, layers x width) give every
  block a width-wide input, which the block gates with Linear(h, width) and projects back with
  Linear(width, h) (`per_layer_input_gate`, `per_layer_projection`).
- LAuReL (Menghani et al. 2024, "LAuReL: Learned Augmented Residual Layer", arXiv 2411.07501;
  `Gemma3nTextLaurelBlock`): a rank-r Linear(h, r) -> Linear(r, h) beside the attention, normed
  and added to the residual.
"""

from __future__ import annotations

from pydantic import Field

from modelplan.specs.base import Spec


class AltUpSpec(Spec):
    """Alternating updates over `inputs` copies of the residual stream."""

    inputs: int = Field(4, ge=2)
    """n: copies of the residual stream (HF altup_num_inputs)."""


class PerLayerInputSpec(Spec):
    """Per-layer token inputs."""

    width: int = Field(gt=0)
    """Width of each block's input (HF hidden_size_per_layer_input)."""
    vocab: int = Field(gt=0)
    """Rows of the per-layer token table (HF vocab_size_per_layer_input)."""
