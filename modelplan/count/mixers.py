"""Exact parameters, forward FLOPs, kept activation bytes and inference state of the Mamba-2 and
gated DeltaNet mixers (`modelplan.specs.mixers`), keyed relative to the block:

    mamba2/{in_proj, conv, ssm, norm, out_proj}                 Mamba-2 (SSD) mixer
    deltanet/{in_proj, conv, ssm, norm, out_proj}               gated DeltaNet mixer

Parameters follow transformers' modules (BambaMixer, NemotronHMamba2Mixer, Qwen3NextGatedDeltaNet);
FLOPs count the projections as GEMMs and the chunked scans as the matmuls of their published
chunkwise algorithms; the kept bytes are what the fused training kernels save for backward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, NamedTuple

from modelplan.count.lightning import (
    lightning_flops, lightning_kept_elements, lightning_params, lightning_state_elements)
from modelplan.count.mlstm import mlstm_flops, mlstm_kept_bytes, mlstm_params, mlstm_state_elements
from modelplan.count.rwkv import rwkv_flops, rwkv_kept_elements, rwkv_params, rwkv_state_elements
from modelplan.count.rglru import rglru_flops, rglru_kept_bytes, rglru_params, rglru_state_elements
from modelplan.count.short_conv import (
    short_conv_flops, short_conv_kept_elements, short_conv_params, short_conv_state_elements)

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec

SHORT_CONV = "short_conv"
"""Layer type of LFM2's gated short-convolution blocks (count/short_conv.py)."""
RGLRU = "rglru"
"""Layer type of RecurrentGemma's Griffin recurrent blocks (count/rglru.py)."""
LIGHTNING = "lightning"
"""Layer type of MiniMax-01's lightning-attention blocks (count/lightning.py)."""
RWKV = "rwkv"
"""Layer type of RWKV-4's blocks: time and channel mixing, no separate MLP (count/rwkv.py)."""
MLSTM = "mlstm"
"""Layer type of xLSTM's mLSTM blocks (count/mlstm.py)."""
PARALLEL_MAMBA2 = "parallel_mamba2"
"""Layer type of a block whose attention and Mamba-2 read the same norm output and sum (Falcon-H1)."""

FP32_BYTES = 4


def mamba2_params(spec: "TransformerSpec") -> dict[str, int]:
    """BambaMixer / GraniteMoeHybridMambaLayer / NemotronHMamba2Mixer (transformers 5.24)."""
    m, h = spec.mamba2, spec.hidden
    bias = m.proj_bias
    return {
        # in_proj: Linear(h, d_inner [z] + conv_dim [x, B, C] + H [dt], bias=proj_bias)
        "mamba2/in_proj": h * m.in_proj_width + (m.in_proj_width if bias else 0),
        # depthwise Conv1d(conv_dim, conv_dim, k, groups=conv_dim): weight (conv_dim, 1, k) + bias
        "mamba2/conv": m.conv_dim * m.conv_kernel + (m.conv_dim if m.conv_bias else 0),
        "mamba2/ssm": 3 * m.heads,  # dt_bias, A_log and D: (H,) each
        # RMSNormGated(d_inner, group_size=d_inner / G): weight (d_inner,); Falcon-H1 may have none
        "mamba2/norm": m.inner if m.gated_norm else 0,
        "mamba2/out_proj": m.inner * h + (h if m.has_out_bias else 0),  # Linear(d_inner, h)
    }


def kda_gate_weights(spec: "TransformerSpec") -> int:
    """Weights of KDA's forget and output gates: Kimi Linear's f_a, f_b, g_a, g_b (rank d_k, one
    head's dims) or Bailing hybrid's full-rank f_proj and g_proj Linear(h, value_dim); each weight
    is one multiply-add a token."""
    g, h = spec.deltanet, spec.hidden
    if g.kda_full_rank_gates:
        return 2 * h * g.value_dim
    return 2 * (h * g.key_head_dim + g.key_head_dim * g.value_dim)


def kda_params(spec: "TransformerSpec") -> dict[str, int]:
    """KimiLinearDeltaAttention / BailingHybridDeltaAttention (transformers 5.24), linears bias-free."""
    g, h = spec.deltanet, spec.hidden
    d = g.value_dim  # all channels
    return {
        "deltanet/in_proj": h * (g.conv_dim + g.value_heads),  # q_proj, k_proj, v_proj; b_proj (h, heads)
        "deltanet/gates": kda_gate_weights(spec),  # forget and output gates
        "deltanet/conv": g.conv_dim * g.conv_kernel,  # Conv1d(3 d, 3 d, k, groups=3 d, bias=False)
        "deltanet/ssm": d + g.value_heads,  # dt_bias per channel, A_log per head
        "deltanet/norm": g.value_head_dim,  # o_norm: RMSNormGated(head_dim)
        "deltanet/out_proj": d * h,
    }


def deltanet_params(spec: "TransformerSpec") -> dict[str, int]:
    """Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet (transformers 5.24), all linears bias-free."""
    g, h = spec.deltanet, spec.hidden
    if g.kda:
        return kda_params(spec)
    return {
        # in_proj_qkvz: Linear(h, 2 key_dim + 2 value_dim); in_proj_ba: Linear(h, 2 value_heads)
        # (Qwen3.5 splits them into in_proj_qkv, in_proj_z, in_proj_b, in_proj_a: the same sizes)
        "deltanet/in_proj": h * (2 * g.key_dim + 2 * g.value_dim + 2 * g.value_heads),
        "deltanet/conv": g.conv_dim * g.conv_kernel,  # Conv1d(conv_dim, conv_dim, k, groups=conv_dim, bias=False)
        "deltanet/ssm": 2 * g.value_heads,  # dt_bias and A_log: (value_heads,) each
        "deltanet/norm": g.value_head_dim,  # RMSNormGated(head_v_dim): one weight shared by the heads
        "deltanet/out_proj": g.value_dim * h,  # Linear(value_dim, h, bias=False)
    }


def mamba2_scan_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> int:
    """The SSD algorithm with chunk length Q (Dao & Gu 2024, sec. 6 and Listing 1): per token,
    the diagonal blocks' C B^T (Q x N per group) and its product with x (Q x P per head), the
    chunk states B^T x and the state-to-output C h (N x P per head each); the state passing
    between chunks and the gating are elementwise (not counted)."""
    m = spec.mamba2
    q = min(m.chunk_size, seq_len)  # a sequence shorter than a chunk is one chunk
    per_token = 2 * q * m.state_size * m.groups + 2 * q * m.head_dim * m.heads + 4 * m.state_size * m.inner
    return tokens * per_token


def deltanet_scan_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> int:
    """The chunkwise gated delta rule with chunk length C (Yang et al. 2024, arXiv 2406.06484
    sec. 3.2, WY representation; gated form arXiv 2412.06464 sec. 3.3), per token and value head:
    K K^T, W = T (beta K), Q K^T (C x d_k each), U = T (beta V) and the intra-chunk output
    (C x d_v each), then W S, Q S and the state update K^T (U - W S) (d_k x d_v each); q and k
    are repeated to the value heads. The C x C triangular solve (C^2/3 per token) is left out."""
    g = spec.deltanet
    c = min(g.chunk_size, seq_len)
    dk, dv = g.key_head_dim, g.value_head_dim
    return tokens * g.value_heads * (2 * c * (3 * dk + 2 * dv) + 6 * dk * dv)


def mamba2_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of a Mamba-2 mixer: in_proj and out_proj GEMMs, the depthwise conv (k
    multiply-adds per channel and token) and the SSD scan."""
    m, h = spec.mamba2, spec.hidden
    return {
        "mamba2/in_proj": 2 * tokens * h * m.in_proj_width,  # (t, h) @ (h, 2 d_in + 2 G N + H)
        "mamba2/conv": 2 * tokens * m.conv_dim * m.conv_kernel,
        "mamba2/scan": mamba2_scan_flops(spec, tokens, seq_len),
        "mamba2/out_proj": 2 * tokens * m.inner * h,  # (t, d_in) @ (d_in, h)
    }


def deltanet_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of a gated DeltaNet mixer: the input GEMMs, the conv and the chunked delta
    rule, out_proj."""
    g, h = spec.deltanet, spec.hidden
    if g.kda:  # q, k, v, b projections and the forget / output gates (Kimi Linear, Bailing hybrid)
        return {
            "deltanet/in_proj": 2 * tokens * h * (g.conv_dim + g.value_heads),
            "deltanet/gates": 2 * tokens * kda_gate_weights(spec),
            "deltanet/conv": 2 * tokens * g.conv_dim * g.conv_kernel,
            "deltanet/scan": deltanet_scan_flops(spec, tokens, seq_len),
            "deltanet/out_proj": 2 * tokens * g.value_dim * h,
        }
    return {
        "deltanet/in_proj": 2 * tokens * h * (2 * g.key_dim + 2 * g.value_dim + 2 * g.value_heads),
        "deltanet/conv": 2 * tokens * g.conv_dim * g.conv_kernel,
        "deltanet/scan": deltanet_scan_flops(spec, tokens, seq_len),
        "deltanet/out_proj": 2 * tokens * g.value_dim * h,
    }


def _mamba2_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    m = spec.mamba2
    return d * (m.in_proj_width + m.inner) + FP32_BYTES * m.groups


def _deltanet_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    g = spec.deltanet
    hv = g.value_heads
    if g.kda:  # fla chunk_kda (ops/kda/chunk.py): save_for_backward(q, k, v, g, beta, Aqk, Akk), g fp32
        # per channel; around it the conv input, the gates' low-rank inputs and output-gate logits,
        # the core output and the norm output
        low_rank = 0 if g.kda_full_rank_gates else 2 * g.key_head_dim  # the low-rank gates' inner outputs
        elements = g.conv_dim + g.conv_dim + 2 * hv * g.chunk_size + hv + low_rank + 3 * g.value_dim
        return d * elements + FP32_BYTES * g.value_dim
    elements = g.conv_dim + 2 * hv * g.key_head_dim + g.value_dim + hv * g.chunk_size + 2 * hv + 3 * g.value_dim
    return d * elements + FP32_BYTES * hv


def _mamba2_state_elements(spec: "TransformerSpec") -> int:
    m = spec.mamba2
    return m.conv_dim * m.conv_kernel + m.heads * m.head_dim * m.state_size


def _deltanet_state_elements(spec: "TransformerSpec") -> int:
    g = spec.deltanet
    return g.conv_dim * g.conv_kernel + g.value_heads * g.key_head_dim * g.value_head_dim


class _Mixer(NamedTuple):
    """One linear mixer's counts, each as a function of the spec (and tokens, bytes)."""

    params: Callable[["TransformerSpec"], dict[str, int]]
    flops: Callable[["TransformerSpec", int, int], dict[str, int]]  # (spec, tokens, seq_len)
    kept_bytes: Callable[["TransformerSpec", int], int]  # (spec, d): bytes per token
    out_width: Callable[["TransformerSpec"], int]
    state: Callable[["TransformerSpec"], int]


_MIXERS: dict[str, _Mixer] = {
    "mamba2": _Mixer(mamba2_params, mamba2_flops, _mamba2_kept_bytes, lambda s: s.mamba2.inner,
                     _mamba2_state_elements),
    "gated_deltanet": _Mixer(deltanet_params, deltanet_flops, _deltanet_kept_bytes, lambda s: s.deltanet.value_dim,
                             _deltanet_state_elements),
    SHORT_CONV: _Mixer(short_conv_params, lambda s, tokens, seq_len: short_conv_flops(s, tokens),
                       lambda s, d: d * short_conv_kept_elements(s), lambda s: s.hidden, short_conv_state_elements),
    RGLRU: _Mixer(rglru_params, lambda s, tokens, seq_len: rglru_flops(s, tokens), rglru_kept_bytes,
                  lambda s: s.rglru.width, rglru_state_elements),
    LIGHTNING: _Mixer(lightning_params, lightning_flops, lambda s, d: d * lightning_kept_elements(s),
                      lambda s: s.lightning.width, lightning_state_elements),
    RWKV: _Mixer(rwkv_params, lambda s, tokens, seq_len: rwkv_flops(s, tokens), lambda s, d: d * rwkv_kept_elements(s),
                 lambda s: s.rwkv.attention_hidden, rwkv_state_elements),
    MLSTM: _Mixer(mlstm_params, mlstm_flops, mlstm_kept_bytes, lambda s: s.mlstm.v_dim, mlstm_state_elements),
}
"""Each linear mixer's counts, by layer type (a new mixer is one row)."""
LINEAR_MIXERS = tuple(_MIXERS)
"""Layer types whose mixer is one of this module's (a fixed-size state, no K/V cache)."""


def mixer_params(spec: "TransformerSpec", mixer: str) -> dict[str, int]:
    """Parameters of a linear mixer of layer type `mixer`."""
    return _MIXERS[mixer].params(spec)


def mixer_flops(spec: "TransformerSpec", mixer: str, tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of a linear mixer of layer type `mixer` over `tokens` tokens in sequences
    of `seq_len`."""
    return _MIXERS[mixer].flops(spec, tokens, seq_len)


def kept_bytes_per_token(spec: "TransformerSpec", mixer: str, d: int) -> int:
    """Bytes per token a linear mixer keeps for backward (all split by tp: heads are), with
    16-bit values of `d` bytes.

    Mamba-2: mamba_ssm's fused `mamba_split_conv1d_scan_combined` (ssd_combined.py,
    MambaSplitConv1dScanCombinedFn.forward: save_for_backward(zxbcdt, ..., out_x, ..., rstd, ...))
    keeps the in_proj output and the scan output, the norm's fp32 rstd per group, and recomputes
    the conv output, the states and the out_proj input in backward.
    Gated DeltaNet: fla's `chunk_gated_delta_rule` (ops/gated_delta_rule/chunk.py,
    save_for_backward(q, k, v, g, beta, A)) keeps q and k at the value heads, v, beta, the fp32
    gate g and A (C per head and token), recomputing the chunk states; around it the causal
    conv keeps its input (q, k, v), the gate z, the core output and the norm output (out_proj
    input), and softplus its input a. LFM2's short conv: count/short_conv.py."""
    return _MIXERS[mixer].kept_bytes(spec, d)


def out_proj_width(spec: "TransformerSpec", mixer: str) -> int:
    """Width of the mixer's out_proj input."""
    return _MIXERS[mixer].out_width(spec)


def state_elements(spec: "TransformerSpec", mixer: str) -> int:
    """Inference state of one block for one sequence, whatever its length: the conv window and
    the SSM / delta-rule state (transformers' hybrid caches: conv_states (conv_dim, k) and
    ssm_states (H, P, N) for Mamba-2; conv_states (conv_dim, k) and recurrent_states
    (value_heads, d_k, d_v) for gated DeltaNet; conv_states (h, L) for LFM2's short conv)."""
    return _MIXERS[mixer].state(spec)
