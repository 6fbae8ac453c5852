"""Exact parameters, forward FLOPs and kept activation bytes of Gemma 3n's side paths
(`modelplan.specs.side_paths`: AltUp, per-layer inputs, LAuReL) and of its K/V-sharing blocks:

    embedding/{per_layer/token, per_layer/proj, per_layer/norm, altup}    input side
    head/altup                                                           the unembedding projections
    altup, laurel, per_layer_input                                       in every block (norms included)

Parameters follow transformers 5.24 `Gemma3nTextModel` / `Gemma3nTextDecoderLayer`; every linear
is bias-free. FLOPs count the linears as GEMMs and AltUp's per-token (h x n) @ (n x n) prediction
mix as a matmul; AltUp's correction (a per-copy scale of the innovation), the magnitude
renormalisation and the per-layer gating product are element-wise (not counted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.encoder_inputs import input_head_params, input_params
from modelplan.count.cca import input_affine_params
from modelplan.count.mla_extras import mla_embedding_params
from modelplan.count.hyperconn import hc_block_flops, hc_block_params, hc_head_flops, hc_head_params, hc_kept_bytes

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def _norm(spec: "TransformerSpec", width: int) -> int:
    """Gemma3nRMSNorm(width): a weight of width (the spec's norms have no bias here)."""
    return width * (2 if spec.norm_bias else 1) if spec.norm_affine else 0


def embedding_side_params(spec: "TransformerSpec") -> dict[str, int]:
    """Input-side parameters, keyed relative to `embedding/`."""
    h, out = spec.hidden, {}
    p = spec.per_layer_input
    if p is not None:
        width = spec.layers * p.width
        out["per_layer/token"] = p.vocab * width  # embed_tokens_per_layer: Embedding(vocab_pl, L w)
        out["per_layer/proj"] = h * width  # per_layer_model_projection: Linear(h, L w)
        out["per_layer/norm"] = _norm(spec, p.width)  # per_layer_projection_norm: RMSNorm(w)
    if spec.altup is not None:
        out["altup"] = (spec.altup.inputs - 1) * h * h  # altup_projections: n - 1 x Linear(h, h)
    # ZAYA's input scale and bias (count/cca.py), Mistral Large 4's rotary alpha (count/mla_extras.py);
    # patch / audio front-ends (count.encoder_inputs)
    return {**out, **input_affine_params(spec), **mla_embedding_params(spec), **input_params(spec)}


def head_side_params(spec: "TransformerSpec") -> dict[str, int]:
    """Output-side parameters, keyed relative to `head/`: altup_unembed_projections; DeepSeek-V4's
    hyper-connection head (count/hyperconn.py); an image / audio encoder's task head (count.encoder_inputs)."""
    altup = {"altup": (spec.altup.inputs - 1) * spec.hidden ** 2} if spec.altup is not None else {}
    return {**altup, **hc_head_params(spec), **input_head_params(spec)}


def block_side_params(spec: "TransformerSpec") -> dict[str, int]:
    """One block's side-path parameters, keyed relative to the block."""
    h, out = spec.hidden, {}
    if spec.altup is not None:
        n = spec.altup.inputs
        # correct_output_scale (h), correction_coefs Linear(n, n), prediction_coefs Linear(n, n^2),
        # modality_router Linear(h, n), router_norm RMSNorm(h)
        out["altup"] = h + n * n + n ** 3 + h * n + _norm(spec, h)
    if spec.laurel_rank is not None:
        r = spec.laurel_rank  # linear_left Linear(h, r), linear_right Linear(r, h), post_laurel_norm
        out["laurel"] = 2 * h * r + _norm(spec, h)
    if spec.per_layer_input is not None:
        w = spec.per_layer_input.width  # per_layer_input_gate, per_layer_projection, post_per_layer_input_norm
        out["per_layer_input"] = 2 * h * w + _norm(spec, h)
    return {**out, **hc_block_params(spec)}  # attn_hc and ffn_hc (count/hyperconn.py)


def kv_shared_saving(spec: "TransformerSpec") -> tuple[int, int]:
    """(attention/qkv, attention/qk_norm) parameters a K/V-sharing block lacks: k_proj and v_proj
    (Linear(h, kv_width) each) and k_norm (head_dim, v_norm has no weight)."""
    qkv = (spec.kv_width + spec.v_proj_width) * (spec.hidden + (1 if spec.qkv_bias else 0))
    return qkv, _norm(spec, spec.dim_head) if spec.qk_norm else 0


def embedding_side_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """Input-side forward FLOPs, keyed relative to `embedding/` (lookups free)."""
    h, out = spec.hidden, {}
    if spec.per_layer_input is not None:
        out["per_layer/proj"] = 2 * tokens * h * spec.layers * spec.per_layer_input.width  # (t, h) @ (h, L w)
    if spec.altup is not None:
        out["altup"] = 2 * tokens * (spec.altup.inputs - 1) * h * h
    return out


def head_side_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """The unembedding projections' forward FLOPs, keyed relative to `head/`."""
    out = {"altup": 2 * tokens * (spec.altup.inputs - 1) * spec.hidden ** 2} if spec.altup is not None else {}
    return {**out, **hc_head_flops(spec, tokens)}


def block_side_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """One block's side-path forward FLOPs over `tokens` tokens."""
    h, out = spec.hidden, {}
    if spec.altup is not None:
        n = spec.altup.inputs
        # router twice (predict, correct) (t, h) @ (h, n); prediction_coefs (t, n) @ (n, n^2);
        # correction_coefs (t, n) @ (n, n); the prediction mix (h, n) @ (n, n) per token
        out["altup"] = 2 * tokens * (2 * h * n + n ** 3 + n * n + h * n * n)
    if spec.laurel_rank is not None:
        out["laurel"] = 2 * tokens * 2 * h * spec.laurel_rank  # (t, h) @ (h, r), (t, r) @ (r, h)
    if spec.per_layer_input is not None:
        out["per_layer_input"] = 2 * tokens * 2 * h * spec.per_layer_input.width  # gate and projection
    return {**out, **hc_block_flops(spec, tokens)}


def block_side_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    """Bytes per token a block's side paths keep for backward (an estimate, 16-bit values of `d`
    bytes, every tensor autograd saves through the eager forward): AltUp's stacked input and
    predictions (2 n h) and its two router-norm inputs (2 h); LAuReL's input-side output (r) and
    its norm input (h); the per-layer gate output, its activation and the product (3 w) and the
    projection's output, the norm input (h). Not split by tensor parallelism."""
    h, out = spec.hidden, 0
    if spec.altup is not None:
        out += 2 * spec.altup.inputs * h + 2 * h
    if spec.laurel_rank is not None:
        out += spec.laurel_rank + h
    if spec.per_layer_input is not None:
        out += 3 * spec.per_layer_input.width + h
    return d * out + hc_kept_bytes(spec, d)  # the n residual streams (count/hyperconn.py)
