"""Training settings: batch, sequence length, precision, optimizer and activation recompute."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from modelplan.specs.base import Spec
from modelplan.specs.engine import (AcMode, CpCommType, Elementwise, Fp8Recipe, Framework, LossKernel,
                                   RecomputeMethod, RecomputeModule)
from modelplan.specs.finetune import FinetuneSpec
from modelplan.specs.recompute import check_recompute_settings

Precision = Literal["fp32", "bf16", "fp16", "fp8"]
Optimizer = Literal["sgd", "momentum", "adam", "adamw"]
Recompute = Literal["none", "selective", "full"]
AttentionKernel = Literal["flash", "sdpa", "eager"]

# Bytes per element of the compute dtype (fp8 mixed precision keeps bf16 activations and
# weights in bf16 copies; Transformer Engine convention).
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}


class TrainingSpec(Spec):
    """What one optimizer step processes and how numbers are stored."""

    global_batch: int = Field(1, gt=0)
    """Sequences (or samples) per optimizer step, over all data-parallel ranks."""
    seq_len: int = Field(2048, gt=0)
    """Tokens per sequence (ignored by non-sequence networks); the encoder's for encoder-decoders."""
    decoder_seq_len: int | None = Field(None, gt=0)
    """Encoder-decoder models (T5): target tokens per sequence; None means seq_len."""
    images_per_seq: int | None = Field(None, ge=0)
    """Images each sequence carries through the model's vision tower (`modelplan.count.vision_step`);
    None: 1 for a model with a tower (a VLM's image in its sequence; an image-text pair's one image
    per text), 0 without one."""
    precision: Precision = "bf16"
    """fp32, or mixed precision with bf16 / fp16 / fp8 matmuls."""
    optimizer: Optimizer = "adamw"
    """sgd (no state), momentum (1 state), adam/adamw (2 states)."""
    master_weights: bool | None = None
    """Keep fp32 master weights; None means yes for mixed precision, no for fp32."""
    grad_dtype: Literal["fp32", "same"] = "fp32"
    """Gradient accumulation buffer: fp32 (Megatron default) or the compute dtype."""
    optimizer_state_dtype: Literal["fp32", "same"] = "fp32"
    """Optimizer states (Adam m and v): fp32 (Megatron, DeepSpeed, an fp32-master or fp32-parameter
    run) or the compute dtype (`torch.optim.AdamW` over bf16 parameters without a master copy:
    its states are `zeros_like(param)`, torch/optim/adamw.py `_init_group`)."""
    recompute: Recompute = "none"
    """Activation recomputation: none, selective (attention core) or full (per layer)."""
    attention: AttentionKernel = "flash"
    """Attention kernel: flash (FlashAttention / cuDNN / Transformer Engine fused attention: keeps
    only the output and the row log-sum-exp, no s x s tensors; what Megatron-core, torchtitan,
    llm-foundry and NeMo run), sdpa (PyTorch scaled_dot_product_attention, whose 16-bit training
    backends are fused the same way) or eager (unfused matmul-softmax-matmul: the s x s scores,
    probabilities and dropout mask go through HBM and are kept; Megatron-LM 2021-22)."""
    framework: Framework = "megatron"
    """Training engine (`modelplan.specs.engine`): its profile sets the defaults below that are
    None, the kernels it runs and what it holds in memory (presets/frameworks/<name>.toml)."""
    ac_mode: AcMode | None = None
    """What recompute 'selective' recomputes; None: the engine's own meaning (Megatron: the
    attention core; torchtitan: per-op selective AC)."""
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    """Megatron-core `--recompute-modules` (recompute 'selective' only): the submodules whose
    forward re-runs in backward (`modelplan.count.recompute_modules`); None: the engine's own
    selective (`ac_mode`; Megatron-core's default is ("core_attn",))."""
    recompute_method: RecomputeMethod | None = None
    """Megatron-core `--recompute-method` (recompute 'full' only): uniform (groups of
    `recompute_num_layers` layers, only each group's input kept) or block (the first
    `recompute_num_layers` layers of each pipeline chunk recomputed, the rest keep everything);
    None: every layer checkpointed on its own (uniform with 1 layer)."""
    recompute_num_layers: int | None = Field(None, ge=1)
    """Megatron-core `--recompute-num-layers`: the group size (uniform) or the recomputed layers per
    pipeline chunk (block); needs `recompute_method`."""
    fp8_recipe: Fp8Recipe | None = None
    """fp8 scaling recipe (precision fp8 only); None: the engine's default (TE delayed scaling,
    torchao tensorwise)."""
    compile: bool = False
    """torch.compile: element-wise ops fused into generated kernels (eager engines only; the
    fused engines' kernels are fused already)."""
    compile_loss: bool | None = None
    """torch.compile covers the loss as well (its fp32 upcast and softmax fused, 2 d bytes per
    logit kept); None: whenever `compile` is on and the engine compiles its loss
    (`EngineProfile.compiles_loss`); False: an engine version that left it eager (torchtitan
    9dec370, Dec 2024: `# if job_config.training.compile: loss_fn = torch.compile(loss_fn)`
    commented out, e8977b007)."""
    loss_upcast: bool = True
    """The eager cross-entropy casts the 16-bit logits to fp32 first (`F.cross_entropy(logits.float())`:
    torchtitan, HF transformers' ForCausalLMLoss); False: it runs on the 16-bit logits (NeMo
    AutoModel MaskedCrossEntropy(fp32_upcast=False)): d instead of 4 bytes per logit for the kept
    softmax and its gradients (`count.eager.cross_entropy_peak_bytes`). Only the eager
    `loss_kernel` reads it, for both the bytes it moves and the bytes it holds."""
    sac_saves_attention: bool = True
    """Per-op selective AC (`ac_mode` op_sac) keeps attention's output and log-sum-exp: the SDPA
    kernel the run dispatched is in the engine's save list (torchtitan `_save_list`: the flash and
    efficient ops). False: it is not, so attention is recomputed in backward, its output not kept
    (torchtitan 3b85aa31f, 2025-05-14, puts SDPBackend.CUDNN_ATTENTION first on compute capability
    10.x; `_scaled_dot_product_cudnn_attention` joined `_save_list` only in b39377f9f, 2025-12-01)."""
    fsdp_ends_in_root: bool = False
    """FSDP2's root group holds the word embedding, final norm and output head (torchtitan before
    83e694105, 2025-07-28: the blocks got `fully_shard` each and `fully_shard(model)` took the rest).
    FSDP2 does not reshard the root after forward (torch fsdp/_fully_shard/_fsdp_state.py `_lazy_init`)
    and reduce-scatters its gradients in the final backward callback (`_root_post_backward_final_callback`:
    its forward input, the token ids, needs no gradient), so under ZeRO-3 without PP the embedding
    stays gathered beside the head and the head's unsharded gradient lives to the end of backward."""
    loss_kernel: LossKernel | None = None
    """The cross-entropy kernels this run's loss runs (Megatron-core `--cross-entropy-loss-fusion`
    with `--cross-entropy-fusion-impl native` -> megatron_native, `te` -> te; NeMo 2 / Megatron-Bridge
    turn the fusion on in their model configs); None: the engine's (`EngineProfile.loss_kernel`)."""
    tensor_rate: float | None = Field(None, gt=0, le=1)
    """Fraction of the priced tensor-core rate this run's step keeps (a figure measured on your
    stack and part); None: the engine's figure for the accelerator's architecture
    (`EngineProfile.tensor_rate_by_arch`, 1 where it lists none). Multiplies GEMM and fused
    attention rates only (`modelplan.plan.tensor_rate`)."""
    fused_norm: bool = False
    """The norm runs as one fused kernel that keeps its input (torchtitan `norm_type =
    "fused_rmsnorm"`, a Triton RMSNorm saving x, weight and rstd; apex) while the engine's other
    element-wise ops run as it runs them (eager engines: PyTorch composites)."""
    elementwise: Elementwise | None = None
    """How the model's own code runs its element-wise ops where that is not the engine's: 'eager'
    for PyTorch composites (transformers' LlamaRMSNorm casts its input to fp32 and keeps it, SiLU's
    output is kept apart from the product) under an engine whose profile fuses them (DeepSpeed
    ZeRO over a transformers model); None: the engine's (`EngineProfile.elementwise`)."""
    fp8_param_gather: bool = False
    """fp8 training keeps the parameters themselves in fp8 and gathers them in fp8 (Megatron
    `--fp8-param-gather`, set by NeMo / Megatron-Bridge's fp8 mixed-precision recipes; torchao
    `enable_fsdp_float8_all_gather`): no 16-bit weight copy beside the fp8 one (Transformer
    Engine) or fp8 gathered FSDP units (torchao)."""
    tp_comm_overlap: bool | None = None
    """Tensor-parallel collectives overlapped with the GEMMs (Transformer Engine userbuffers
    `tp_comm_overlap`, torchtitan async TP); None: the engine's default (off)."""
    ep_comm_overlap: bool = False
    """Expert-parallel AllToAlls overlapped with another micro-batch's compute (Megatron-core
    `--overlap-moe-expert-parallel-comm`, Megatron-Bridge `moe_a2a_overlap`: forward and backward
    of two micro-batches merged, `modelplan.plan.parallel.ep`); False: exposed."""
    moe_flex_dispatcher: Literal["deepep", "hybridep"] | None = None
    """Megatron-core's flex token dispatcher and its backend (`--moe-token-dispatcher-type flex`,
    `--moe-flex-dispatcher-backend`); None: the all-to-all dispatcher, whose received tokens are
    sorted by local expert and back (`modelplan.plan.expert_sort`)."""
    fake_balanced_gate: bool = False
    """The router replaced by NeMo AutoModel's benchmark `FakeBalancedGate` (BackendConfig
    fake_balanced_gate: token t to experts (t k + j) mod E, k consecutive experts,
    components/moe/layers.py): what DeepEP's deduplicated exchange sends (`modelplan.plan.deepep`);
    False: a learned router, read as uniform over the experts."""
    rope_fusion: bool = True
    """The rotary embedding in a fused kernel (Megatron-core `apply_rope_fusion`: Megatron-LM's
    arguments.py default, `--no-rope-fusion` turns it off; Megatron-Bridge's performance scripts set
    it); False: Megatron-core's unfused `_apply_rotary_pos_emb_bshd` path (NeMo 2's DeepSeekConfig
    default; megatron-core 0.12 has no fused MLA rotary at all), `modelplan.plan.rotary_fusion`."""
    cp_comm_type: CpCommType | None = None
    """Context-parallel exchange of keys and values (Megatron / Transformer Engine
    `--cp-comm-type`, torchtitan's CP rotate method; `modelplan.specs.engine.CpCommType`); None:
    the engine's default (`EngineProfile.cp_comm_type`: Megatron p2p, torchtitan all_gather,
    DeepSpeed a2a)."""
    pp_flush_microbatches: int | None = Field(None, gt=0)
    """Micro-batches per call of the pipeline schedule (a flush) when the engine accumulates
    gradients outside it (NeMo AutoModel, torchtitan: local_batch_size // pp_microbatch_size, the
    step running global_batch / (that x micro_batch x dp) calls; `modelplan.plan.pipeline.flush`):
    the bubble is paid per flush and a rank holds one flush's micro-batches; None: all of the
    step's micro-batches in one flush (Megatron-LM)."""
    dp_overlap: bool | None = None
    """Data-parallel gradient reduction overlapped with the backward; None: the cost model's
    setting (on: Megatron overlap_grad_reduce, DDP buckets, FSDP)."""
    finetune: FinetuneSpec | None = None
    """A fine-tuning step (`modelplan.specs.finetune`): LoRA / QLoRA train adapters on a frozen
    base (the planner prices that, `modelplan.plan.finetune`); None: every parameter trains."""

    @model_validator(mode="after")
    def _check_recompute(self) -> "TrainingSpec":
        check_recompute_settings(self)
        return self

    @model_validator(mode="after")
    def _check_fp8(self) -> "TrainingSpec":
        if self.fp8_param_gather and self.precision != "fp8":
            raise ValueError(f"fp8_param_gather needs precision 'fp8' (--precision fp8), not '{self.precision}'")
        if self.fp8_recipe is not None and self.precision != "fp8":
            raise ValueError(f"fp8_recipe ('{self.fp8_recipe}') needs precision 'fp8' (--precision fp8), not '{self.precision}'")
        ft = self.finetune
        if ft is not None and ft.uses_adapters and self.precision == "fp8":
            raise ValueError(f"finetune '{ft.method}' with precision fp8 is not modelled (adapters on a frozen "
                             "base train in bf16, fp16 or fp32)")
        return self

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element of weights and activations in the compute dtype."""
        return DTYPE_BYTES[self.precision]

    @property
    def uses_master_weights(self) -> bool:
        """fp32 master copy present (default: yes whenever the compute dtype is not fp32)."""
        if self.master_weights is not None:
            return self.master_weights
        return self.precision != "fp32"

    @property
    def grad_bytes(self) -> int:
        """Bytes per gradient element."""
        return 4 if self.grad_dtype == "fp32" else self.dtype_bytes

    @property
    def optimizer_state_bytes(self) -> int:
        """Bytes per element of each optimizer state tensor."""
        return 4 if self.optimizer_state_dtype == "fp32" else self.dtype_bytes

    @property
    def optimizer_states(self) -> int:
        """fp32 state tensors per parameter: Adam m and v, momentum buffer, or none."""
        return {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}[self.optimizer]
