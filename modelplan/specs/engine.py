"""Training engines (Megatron-core, DeepSpeed, torchtitan, PyTorch FSDP) as data: what each one
runs and holds that changes a step's time and memory.

A training run names its engine (`TrainingSpec.framework`); the engine's profile
(presets/frameworks/<name>.toml, every value with its source) fills the defaults the run does not
set: which fused-attention kernel it calls, whether element-wise ops are fused kernels or eager
PyTorch composites, what its "selective" recompute keeps, how its loss holds the logits, what its
allocator reserves. The run's own settings (`ac_mode`, `fp8_recipe`, `compile`, the plan's
`reshard_after_forward`, `tp_comm_overlap`) win over the profile.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from modelplan.specs.base import Spec
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Architecture

Framework = Literal["megatron", "deepspeed", "torchtitan", "fsdp", "foundry", "automodel"]
"""megatron: Megatron-LM / Megatron-core / NeMo / Megatron-Bridge; deepspeed: DeepSpeed ZeRO and
Megatron-DeepSpeed; torchtitan: PyTorch FSDP2 + DTensor TP/PP/CP; fsdp: PyTorch FSDP1 stacks
(HF Trainer / accelerate, fms-fsdp); foundry: llm-foundry / Composer (FSDP1, MPT's kernels); automodel: NeMo AutoModel (FSDP2 + DTensor
EP, torch pipelining, Transformer Engine kernels)."""

AcMode = Literal["attention_core", "op_sac", "layer_sac", "every_nth_block"]
"""What `recompute = "selective"` recomputes: attention_core (Megatron / Korthikanti et al. 2022:
QK^T, softmax, dropout, AV); op_sac (torchtitan per-op selective AC: keeps the outputs of every
other matmul, of attention and of the collectives, recomputes the rest); layer_sac (torchtitan:
full recompute of every N-th block, N = `EngineProfile.layer_sac_every`); every_nth_block
(fms-fsdp `selective_checkpointing`: the same rule, N unpublished, read as N = 2)."""

RecomputeModule = Literal["core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"]
"""Megatron-core `TransformerConfig.recompute_modules` (transformer_config.py, core_v0.16):
core_attn (the attention core), moe_act (the routed experts' activation), layernorm (the norms
that are modules of their own), mla_up_proj (MLA's Q / KV up-projections and rope), mlp (a dense
layer's MLP), moe (the whole MoE layer), shared_experts (the MoE layer's shared experts)."""

RecomputeMethod = Literal["uniform", "block"]
"""Megatron-core `TransformerConfig.recompute_method` under full recompute."""

Fp8Recipe = Literal["delayed", "current", "tensorwise", "rowwise", "blockwise"]
"""fp8 scaling: delayed (Transformer Engine DelayedScaling: scale from an amax history, amax taken
inside the cast), current (TE per-tensor current scaling: an amax pass before each cast),
tensorwise (torchao dynamic per-tensor scaling, same passes as current), rowwise (torchao: one
scale per row, kept in high precision for the transposed operands) and blockwise (1x128
activations, 128x128 weights; DeepSeek-V3 style)."""

CpCommType = Literal["p2p", "all_gather", "a2a"]
"""How context-parallel attention exchanges keys and values (`modelplan.plan.parallel.cp`): p2p
(ring send/recv of K, V blocks overlapped with attention: Transformer Engine / Megatron
`--cp-comm-type p2p`, PyTorch CP rotate method 'alltoall'), all_gather (an AllGather of K, V
before attention: TE / Megatron `all_gather`, Llama 3's CP, PyTorch CP rotate method
'allgather'), a2a (DeepSpeed-Ulysses: AllToAll of Q, K, V and of the output, heads split over
cp; TE / Megatron `a2a`)."""

Elementwise = Literal["fused", "eager"]
"""How norms, activations, rotary and the loss run: fused kernels or PyTorch composites."""
LossKernel = Literal["megatron", "megatron_2022", "megatron_native", "te", "te_fp32_grad", "eager", "compiled",
                     "flash_attn"]
"""The cross-entropy kernels the loss runs, which set both the bytes it moves and the bytes it holds
(`modelplan.count.loss_kernels`): megatron (Megatron-LM / Megatron-core unfused
`vocab_parallel_cross_entropy`, in-place subtract: 2020-22 and from 2024-06), megatron_2022 (the
same, Megatron-core 2022-09 to 2024-06 and microsoft Megatron-DeepSpeed's copy: out-of-place
subtract), megatron_native
(Megatron-core `--cross-entropy-loss-fusion`, fusion impl "native"), te (fusion impl "te":
Transformer Engine's Triton `parallel_cross_entropy`, TE 2.2-2.17), te_fp32_grad (the same, TE
2.18 on: an fp32 gradient), eager (`F.cross_entropy(logits.float())`), compiled (the same under
torch.compile), flash_attn (flash-attn's Triton cross-entropy, llm-foundry)."""

ParamGatherWindow = Literal["step_forwards", "first_microbatch", "optimizer_step"]
"""Which forwards a ZeRO-1/2 step's overlapped parameter AllGather hides behind
(`modelplan.comm.dp_overlap.param_gather_window_s`): step_forwards (all of the step's
micro-batches), first_microbatch (Megatron-core's distributed optimizer: the buckets are chained
through the forward pre-hooks, so only the first micro-batch's forward, per model chunk when
interleaved) or optimizer_step (none: the engine gathers synchronously at the end of its optimizer
step, DeepSpeed ZeRO-1/2 and BF16_Optimizer)."""

AttentionImpl = Literal["fa2", "fa3", "cudnn"]
"""Fused-attention kernels whose sustained rates accelerator presets may list
(`Accelerator.attention_efficiency`): FlashAttention-2, FlashAttention-3, cuDNN fused attention."""


class EngineProfile(Spec):
    """One engine's defaults (presets/frameworks/<name>.toml)."""

    name: Framework
    """The engine."""
    attention_kernels: tuple[AttentionImpl, ...] = Field(min_length=1)
    """Fused-attention kernels in the engine's order of preference; the first one the accelerator
    lists a rate for is used (Transformer Engine prefers cuDNN on Hopper and FlashAttention-2
    before; PyTorch SDPA runs FlashAttention-2)."""
    elementwise: Elementwise
    """fused: norms, activations, rotary and the loss are single fused kernels (Megatron / TE,
    apex, torch.compile); eager: they are PyTorch composites of several kernels, each a full pass
    over HBM (`modelplan.count.eager`)."""
    selective: AcMode
    """What this engine's "selective" activation checkpointing means."""
    layer_sac_every: int = Field(2, ge=1)
    """layer_sac / every_nth_block: every N-th block is fully recomputed."""
    loss_kernel: LossKernel
    """The cross-entropy kernels the engine runs when the run does not name them
    (`TrainingSpec.loss_kernel`); an eager loss under torch.compile with the loss compiled is
    'compiled'. The one setting the step's loss time and the last stage's loss memory both read
    (`modelplan.count.loss_kernels`)."""
    compiles_loss: bool = False
    """Under `TrainingSpec.compile` the engine compiles its eager loss too, so the loss holds 2 d
    bytes per logit instead of 12 (`count.loss_kernels.loss_kernel_peak_bytes`; torchtitan's
    `build_cross_entropy_loss` since pytorch/torchtitan bbb1b616e, 2025-04-02)."""
    loss_parallel: bool = False
    """At tp > 1 the output layer leaves its logits vocab-sharded and the eager loss runs over
    the DTensor shards (PyTorch `loss_parallel()`: torchtitan parallelize_llama.py
    ColwiseParallel(output_layouts=Shard(-1)), train.py get_train_context), whose backward
    holds 16 bytes per logit (`count.eager.cross_entropy_peak_bytes`)."""
    pp_microbatch_buffers: bool = False
    """The pipeline runtime keeps one receive buffer per micro-batch for activations and for
    gradients, and each in-flight micro-batch's stage output (torch.distributed.pipelining,
    `memory.pipeline_stage_bytes`); False: the two messages in flight (Megatron's p2p
    communication allocates each receive and frees pipeline outputs, deallocate_pipeline_outputs)."""
    pp_keeps_outputs: bool = False
    """The last pipeline stage keeps every micro-batch's output (the logits) until the step ends
    (torch.distributed.pipelining `output_chunks`, returned by `schedule.step()`)."""
    sdpa_repeats_kv: bool = False
    """Grouped-query K, V are repeated to the query heads before the attention call, so context
    parallelism gathers, sends and buffers K, V at the query heads (torchtitan before ff0829c10,
    2026-01-27: models/llama/model.py `keys = repeat_kv(xk, n_rep)` before
    F.scaled_dot_product_attention, which torch's context_parallel turns into ring attention)."""
    scale_mask_softmax: Literal["fused", "megatron", "megatron_layer_scaled"] = "fused"
    """How eager attention runs its softmax (`modelplan.plan.fused_softmax`): fused (one fused pass
    whatever the shape), megatron (`FusedScaleMaskSoftmax`: its CUDA kernel where
    `is_kernel_available`, else the PyTorch softmax in fp32), megatron_layer_scaled (the same with
    query-key layer scaling, whose fallback also multiplies the scores by the layer number)."""
    fp8_recipe: Fp8Recipe
    """The engine's default fp8 scaling recipe."""
    fp8_backend: Literal["te", "torchao"]
    """Who runs fp8 linear layers: te (Transformer Engine: fp8 weights cast once per step and
    cached with their transposes for every micro-batch, `is_first_microbatch`; the inputs kept
    for backward are the fp8 copies) or torchao (Float8Linear: weights cast in every pass, the
    16-bit input and weight kept and cast again in backward)."""
    sharded_low_precision_copy: bool
    """ZeRO-3 / FSDP keeps a 16-bit copy of its parameter shard besides the fp32 master
    (DeepSpeed ZeRO-3, Megatron-FSDP); False: the fp32 shard is the only copy and the 16-bit
    parameters exist only while gathered (PyTorch FSDP1 / FSDP2 mixed precision)."""
    reduce_in_fp32: bool
    """Gradient reduction in fp32 (Megatron `accumulate_allreduce_grads_in_fp32` under bf16;
    FSDP `reduce_dtype=float32`); False: in the compute dtype."""
    dp_bucket_elements: int = Field(0, ge=0)
    """Elements of the data-parallel staging buffers ZeRO-1/2/3 allocates beside the model states,
    one for the gradient reduction and one for the parameter all-gather (DeepSpeed
    reduce_bucket_size / allgather_bucket_size, 5e8 each); 0: the collectives run in place on the
    engine's contiguous buffers (Megatron, FSDP)."""
    low_precision_grads: bool = False
    """Under bf16 with ZeRO 0/1 the 16-bit `.grad` of every parameter exists beside the fp32
    gradient buffer at the end of each backward (DeepSpeed BF16_Optimizer: backward writes the
    bf16 grads, `update_hp_grads` adds them into the flat fp32 gradients and leaves them
    allocated until the next backward's `clear_lp_grads`); False: the engine accumulates into
    its gradient buffer directly (Megatron main_grad, FSDP)."""
    grad_copy_bytes: int = Field(0, ge=0)
    """HBM bytes per unsharded gradient element the engine moves before each ZeRO-2/3 gradient
    ReduceScatter besides the collective: FSDP casts the unit's 16-bit gradient into an fp32
    reduce buffer (d + 4) and pre-divides it in place (4 + 4); Megatron's GEMMs accumulate
    straight into the fp32 main_grad buffer and average inside the collective (0). Unused where
    `grad_copy_in_only` says the engine's only copy is the copy-in."""
    zero3_gather_copy_out: bool = False
    """ZeRO-3: after each coalesced parameter AllGather into one flat buffer the engine copies
    every gathered parameter out of it (read d, write d bytes per element) on the gather stream,
    before the module may run. DeepSpeed 0.19.8 `partition_parameters.py`
    `AllGatherCoalescedHandle.wait`: `param.data = torch.cat(partitions)` per parameter, inside
    `partitioned_param_coordinator.fetch_sub_module`'s `with stream(self.__allgather_stream)`,
    then `current_stream().wait_stream(allgather_stream)`. False: not priced (the gather lands in
    the parameters' own storage, or the engine's copy is not modelled)."""
    grad_copy_in_only: bool = False
    """FSDP2 (torch >= 2.4): the only pass before each ReduceScatter is `foreach_reduce`'s copy of
    the unsharded 16-bit gradients into the reduce-scatter input of the reduce dtype, d + r bytes
    per element (r = 4 for an fp32 reduce, else d); no pre-divide, NCCL's ReduceOp.AVG divides
    for fp32 and bf16 (torch _fsdp_collectives.py `_get_gradient_divide_factors`: "For fp32/bf16
    ... use NCCL's built-in division to avoid separate div kernels"; pytorch/pytorch#120919 fp32,
    #123362 bf16). False: `grad_copy_bytes` as the profile gives it (FSDP1 pre-divides)."""
    reshard_after_forward: bool
    """ZeRO-3 / FSDP frees gathered parameters after each unit's forward and gathers them again for
    backward; under pipeline parallelism the engine's own rule may differ
    (`reshard_after_forward_pp`)."""
    reshard_after_forward_pp: bool
    """The same under pipeline parallelism (torchtitan: False, 'to avoid per-microbatch
    all-gathers'; the stage's parameters stay gathered across micro-batches)."""
    head_stays_gathered: bool = False
    """Under ZeRO-3 with resharding the output head (final norm + output projection) is not
    resharded after its forward: its 16-bit parameters stay gathered until its backward, i.e. at
    the loss's peak (torchtitan: `fully_shard([model.norm, model.output],
    reshard_after_forward=policy == "always")` in models/llama3/infra/parallelize.py since 2025;
    before, norm and output sat in the root `fully_shard(model)`, which FSDP2 never reshards after
    forward, torch/distributed/fsdp/_fully_shard/_fsdp_state.py `_lazy_init`: "For the root, do not
    reshard after forward since for training, the parameters would be freed and all-gathered
    immediately")."""
    fp8_tp_gather_recipes: tuple[str, ...] = ()
    """fp8 recipes under which the sequence-parallel AllGathers move the 1-byte fp8 casts instead
    of 16-bit activations (torchtitan: tensorwise only, parallelize_llama.py
    enable_float8_tensorwise_tp -> torchao Float8ColwiseParallel casts before the forward gather,
    Float8RowwiseParallel casts the output gradient before the backward gather); the
    ReduceScatters stay 16-bit."""
    sp_saves_gathered_inputs: bool = False
    """Under sequence parallelism the column-parallel linears keep their all-gathered, full-sequence
    input for the weight gradient (PyTorch DTensor SP: PrepareModuleInput Shard(1) -> Replicate,
    then nn.Linear saves it; torchtitan parallelize_llama.py apply_tp) instead of the 1/tp shard
    re-gathered in backward (Megatron-LM, Korthikanti et al. 2022 sec. 4.2.2)."""
    cp_fp32_merge: bool = False
    """Context parallelism runs PyTorch's ring SDPA (torch.distributed.tensor.experimental
    context_parallel, torchtitan): each ring step after the first merges its partial output into
    an fp32 running output (`_SDPAMerger`, convert_to_f32 True) and each backward step adds its
    gradients into fp32 accumulators; memory-bound passes priced per step
    (`modelplan.plan.kernels.cp_merge_kernel`)."""
    cp_comm_type: CpCommType = "p2p"
    """The context-parallel exchange the engine runs when the run does not name one
    (`TrainingSpec.cp_comm_type`); each preset states its source."""
    cp_comm_types: tuple[CpCommType, ...] = ()
    """Every exchange the engine can be told to run; a search whose run names none prices each
    on every cp > 1 plan and keeps the cheapest (`plan/cp_search.py`). Empty: cp_comm_type only."""
    param_gather_window: ParamGatherWindow = "step_forwards"
    """Which forwards the ZeRO-1/2 parameter AllGather of the next step hides behind (`ParamGatherWindow`)."""
    tp_comm_overlap: bool = False
    """Tensor-parallel collectives overlapped with the GEMMs by default (TE userbuffers / async
    TP); off unless the run turns it on in every engine profiled here."""
    tensor_rate_by_arch: dict[Architecture, float] = {}
    """Per accelerator architecture (`Accelerator.architecture`), the fraction of the priced
    tensor-core rate (MAMF x the cost model's sustained fraction x the part's sustained clock)
    this engine's whole step keeps; 1 on architectures not listed. A FITTED figure where no source
    gives one: `tensor_rate_source` names the runs it was fitted to (`modelplan.plan.tensor_rate`;
    the run's `TrainingSpec.tensor_rate` wins)."""
    tensor_rate_source: str = ""
    """Where `tensor_rate_by_arch` comes from (printed with the plan's assumptions)."""
    cost: dict[str, float | int | bool] = {}
    """Overrides of `CostModel` constants for this engine (sustained fraction, overlap, allocator
    reserve, ...); the rest keep the Megatron-LM defaults fitted to Narayanan et al. 2021."""
    source: str = ""
    """Where every value comes from."""

    @model_validator(mode="after")
    def _check_cost(self) -> "EngineProfile":
        unknown = sorted(set(self.cost) - set(CostModel.model_fields))
        if unknown:
            raise ValueError(f"cost: unknown CostModel field(s) {', '.join(unknown)}")
        for arch, rate in self.tensor_rate_by_arch.items():
            if not 0 < rate <= 1:
                raise ValueError(f"tensor_rate_by_arch.{arch} ({rate}) must be in (0, 1]")
        if self.tensor_rate_by_arch and not self.tensor_rate_source:
            raise ValueError("tensor_rate_by_arch needs tensor_rate_source (what the figure was fitted to)")
        return self

    def cost_model(self) -> CostModel:
        """The cost model of this engine: Megatron-LM's defaults with the profile's overrides."""
        return CostModel(**self.cost)
