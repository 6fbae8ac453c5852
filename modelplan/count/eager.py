"""Element-wise ops as eager PyTorch runs them: HBM bytes per element and what autograd keeps.

A fused kernel (Megatron / Transformer Engine, apex, torch.compile) reads its inputs and writes
its outputs once. Eager PyTorch runs a composite op as one kernel per primitive, each a full pass
over HBM, with fp32 upcasts where the module asks for them; autograd keeps the inputs each
primitive's backward needs. The decompositions below are the modules torchtitan and HF Llama
run (torchtitan models/llama/model.py; transformers LlamaRMSNorm, LlamaMLP, apply_rotary_pos_emb);
d is the compute dtype's bytes, fp32 values take 4. Ops PyTorch has as one native kernel
(F.layer_norm, F.gelu, an add) cost what the fused kernel costs and are not listed.
"""

from __future__ import annotations

FP32 = 4

# Kernels each composite launches (forward, backward), counted from the same decompositions.
RMSNORM_KERNELS = (7, 10)
SWIGLU_KERNELS = (2, 3)
ROTARY_KERNELS = (3, 3)
CROSS_ENTROPY_KERNELS = (5, 5)


def rmsnorm_bytes(d: int) -> tuple[int, int]:
    """(forward, backward) HBM bytes per element of `x.float() * rsqrt(pow(2).mean(-1) + eps)`,
    `.type_as(x) * weight`:
    forward: float() d + 4, pow 4 + 4, mean 4, x * r 4 + 4, type_as 4 + d, * weight 2d;
    backward: * weight 5d (dx and the weight-gradient reduction), type_as d + 4, x * r 16 (dx and
    the dr reduction), pow / mean 12, summing the two dx paths 12, float() 4 + d."""
    return 28 + 4 * d, 48 + 7 * d


def rmsnorm_kept_bytes(d: int) -> int:
    """Bytes per element autograd keeps for the eager RMSNorm: the fp32 input (pow and the
    multiply by rsqrt save it) and the normalised bf16 output (the weight multiply saves it),
    against d for a fused norm that keeps its input."""
    return FP32 + d


def swiglu_bytes(d: int) -> tuple[int, int]:
    """(forward, backward) bytes per element of f of `F.silu(a) * b`: silu reads a, writes s
    (2d); the product reads s, b and writes (3d); backward: the product's two gradients read
    g, s, b and write ds, db (5d), silu's reads ds, a and writes da (3d)."""
    return 5 * d, 8 * d


def swiglu_kept_bytes(d: int) -> int:
    """Extra bytes per element of f eager SwiGLU keeps beyond a fused one: silu(a), saved by the
    product (a, b and the product itself are kept either way)."""
    return d


def rotary_bytes(d: int) -> tuple[int, int]:
    """(forward, backward) bytes per element of q and k of the complex rotary embedding:
    float() d + 4, complex multiply by freqs_cis 4 + 4 (the table is small), type_as 4 + d;
    the backward runs the same three passes."""
    return 16 + 2 * d, 16 + 2 * d


def cross_entropy_bytes(d: int, upcast: bool = True) -> tuple[int, int]:
    """(forward, backward) bytes per logit of `F.cross_entropy(logits.float(), labels)`:
    float() d + 4, log_softmax's max, sum-exp and output passes 4 + 4 + 4 + 4; backward: the
    nll gradient (a zero fp32 tensor and a scatter) 4, log_softmax's backward 4 + 4 + 4 + 4,
    float()'s 4 + d. Without the upcast (`upcast` False: `F.cross_entropy(logits, labels)` on the
    d-byte logits) the same passes move d bytes each and there is no cast: 4 d forward, 5 d
    backward."""
    if not upcast:
        return 4 * d, 5 * d
    return d + 20, d + 24


def cross_entropy_peak_bytes(d: int, upcast: bool = True, loss_parallel: bool = False) -> int:
    """Peak bytes per logit `F.cross_entropy(logits.float(), labels)` holds on the last stage
    (forward output to backward end): the fp32 log-softmax kept from the forward, the fp32
    gradient nll's backward writes and log_softmax's fp32 input gradient: 3 x 4, then the d-byte
    cast of that gradient for the output layer's backward once the first of them is freed. Under
    PyTorch's `loss_parallel` (DTensor vocab-sharded logits, torchtitan at tp > 1): nll's and
    log_softmax's backward run as one handler, `(grad_input + torch.exp(x)) * grad_output` beside
    the saved fp32 log-softmax x and the zeros_like(x) gradient (torch/distributed/tensor/parallel/
    loss.py `_nll_loss_and_log_softmax_backward`): x, grad_input, the sum, the product: 4 x 4.
    Without the upcast (`upcast` False, on the d-byte logits: NeMo AutoModel
    MaskedCrossEntropy(fp32_upcast=False)) the same tensors in d bytes and no cast for the output
    layer's backward: 3 d (4 d under loss parallel)."""
    width = FP32 if upcast else d
    return 4 * width if loss_parallel else 3 * width
