"""Memory of one GPU of one pipeline stage: model states sharded by ZeRO, activations of the
micro-batches the schedule keeps in flight, communication buffers, and stated allowances.

Model states: `parallel/dp_zero.py` (`state_bytes`: ZeRO's shards, Rajbhandari et al. 2020).
Activations (Korthikanti et al. 2022 sec. 4.3): a block's stored bytes times the blocks in
flight, which the schedule's action list gives (`pipeline.profile.inflight_microbatches`: 1F1B's
rank r holds min(pp - r, m) micro-batches, GPipe all m, interleaved
min(2(pp - r - 1) + (vpp - 1) pp + 1, m vpp) chunks of layers/(pp vpp) blocks, which is
L (1 + (pp - 1)/(pp vpp)) blocks on the first stage); plus one block's transient working set when
recomputing; token ids and embedding dropout mask on the first stage; logits and loss on the last.
"""

from __future__ import annotations

from modelplan.count.blocks import Block
from modelplan.count.loss_kernels import loss_kernel_peak_bytes
from modelplan.count.memory import activation_bytes_per_layer, embedding_activation_bytes, output_activation_bytes
from modelplan.plan.block_passes import passes_of
from modelplan.plan.engine import MEGATRON_2021, EngineSettings
from modelplan.plan.recompute_layers import uniform_group_bytes
from modelplan.plan.results import StageMemory
from modelplan.plan.stage_time import BlockTerms
from modelplan.specs.costmodel import CostModel
from modelplan.specs.engine import LossKernel
from modelplan.specs.transformer import TransformerSpec


def block_activations(spec: TransformerSpec, micro_batch: int, seq_len: int, dtype_bytes: int, tp: int,
                      sequence_parallel: bool, recompute: str, moe_layer: bool, attention: str, cp: int = 1,
                      software: EngineSettings = MEGATRON_2021, block: Block | None = None,
                      etp: int | None = None, probs_at_combine: bool = False,
                      none_bytes: int | None = None, memory_len: int | None = None) -> tuple[int, int]:
    """(bytes one block keeps per in-flight micro-batch, transient bytes of the block being
    recomputed or back-propagated) on one TP rank (Korthikanti et al. 2022 sec. 4; full recompute
    keeps the block input and works on a whole block, selective keeps what the engine's policy
    keeps, `software.ac_mode`: all but the attention core for Megatron). With context parallelism
    a rank's s/cp queries score all s keys: cp x the (s/cp)^2 score term. `software` also gives
    the element-wise mode (eager composites keep more) and TE fp8's 1-byte linear inputs. `block`:
    the kind of block (`count.blocks.Block`); None: the model's first block with this moe flag.
    `none_bytes`: what the block keeps without recompute, when the caller has it (this function's
    first figure under recompute 'none'), so that it is not counted again. `memory_len`: the encoder
    tokens per sequence a decoder block's cross-attention keeps K and V of (None: seq_len; its cp
    share on this rank)."""
    s_local = seq_len // cp
    memory_local = (seq_len if memory_len is None else memory_len) // cp
    kind = next((i for i in range(spec.layers) if spec.is_moe_layer(i) == moe_layer), None)
    kind = None if block is not None else kind
    mode = "attention_core" if moe_layer and software.ac_mode == "op_sac" else software.ac_mode
    fp8_inputs = software.fp8_recipe is not None and software.fp8_backend == "te"
    ew = software.elementwise

    def kept(rc: str, ac_mode: str = "attention_core") -> int:
        out = activation_bytes_per_layer(spec, micro_batch, s_local, dtype_bytes, tp, sequence_parallel, rc, kind,
                                         attention, ac_mode, ew, software.ac_every, fp8_inputs,
                                         software.norm_elementwise, software.sp_saves_gathered_inputs, block,
                                         etp, probs_at_combine, software.recompute_modules, memory_local,
                                         software.sac_saves_attention)
        if cp > 1 and rc == "none":
            score = out - activation_bytes_per_layer(spec, micro_batch, s_local, dtype_bytes, tp, sequence_parallel,
                                                     "selective", kind, attention, elementwise=ew,
                                                     fp8_inputs=fp8_inputs,
                                                     norm_elementwise=software.norm_elementwise,
                                                     gathered_inputs=software.sp_saves_gathered_inputs, block=block,
                                                     dispatch_tp=etp, probs_at_combine=probs_at_combine,
                                                     memory_len=memory_local)
            out += (cp - 1) * score
        return out

    stored = kept(recompute, mode)
    if recompute == "none":
        return stored, 0
    # a looped block keeps every pass's share but recomputes / back-propagates one pass at a time
    none = (kept("none") if none_bytes is None else none_bytes) // passes_of(spec, block)
    if recompute == "full":  # Megatron-core's uniform groups keep one input per group (plan/recompute_layers.py)
        return uniform_group_bytes(stored, none, software.recompute_method, software.recompute_num_layers)
    if recompute == "selective" and mode in ("layer_sac", "every_nth_block"):
        return stored, none
    if recompute == "selective":
        return stored, none - stored // passes_of(spec, block)
    return stored, 0


def edge_activations(spec: TransformerSpec, micro_batch: int, seq_len: int, dtype_bytes: int, tp: int,
                     sequence_parallel: bool, cp: int = 1, loss_kernel: LossKernel = "megatron",
                     gathered_inputs: bool = False, loss_parallel: bool = False,
                     head_seq_len: int | None = None, loss_upcast: bool = True) -> tuple[int, int]:
    """(first stage, last stage) bytes per in-flight micro-batch (Korthikanti et al. 2022 sec. 4.3:
    token ids and embedding-dropout mask; output layer + cross-entropy 4sbh(1 + V/h)/t with the
    bytes per logit the `loss_kernel` holds at its peak, `count.loss_kernels.loss_kernel_peak_bytes`:
    Megatron's unfused loss 4 + d, the eager loss 12, ...). `gathered_inputs` (DTensor
    SP, torchtitan's output ColwiseParallel(input_layouts=Shard(1))): the output projection keeps
    its all-gathered input, d s b h whole instead of its 1/t share. `loss_parallel` (the engine
    keeps the logits vocab-sharded for the loss, PyTorch `loss_parallel()`): applies at tp > 1
    (torchtitan 9dec370 parallel_dims.py `loss_parallel_enabled = tp > 1 and ...`).
    `head_seq_len`: the tokens per sequence of the head (an encoder-decoder's target length; None:
    seq_len, which the embedding's are). `loss_upcast` False: the eager loss on the d-byte logits."""
    s_local = seq_len // cp
    head_local = (seq_len if head_seq_len is None else head_seq_len) // cp
    per_logit = loss_kernel_peak_bytes(loss_kernel, dtype_bytes, loss_upcast, loss_parallel and tp > 1)
    head = output_activation_bytes(spec, micro_batch, head_local, dtype_bytes, tp, per_logit)
    if gathered_inputs and sequence_parallel and tp > 1 and spec.lm_head:
        whole = dtype_bytes * head_local * micro_batch * spec.hidden
        head += whole - -(-whole // tp)
    return embedding_activation_bytes(spec, micro_batch, s_local, tp, sequence_parallel), head


def stage_output_bytes(spec: TransformerSpec, micro_batch: int, seq_len: int, dtype_bytes: int, tp: int,
                       cp: int = 1, loss_parallel: bool = False) -> int:
    """Bytes of the last stage's output for one micro-batch on one TP rank: the d-byte logits
    (b, s/cp, V), vocab-sharded to V/tp under `loss_parallel` at tp > 1 (torchtitan 9dec370
    parallelize_llama.py output ColwiseParallel(output_layouts=Shard(-1) if loss_parallel else
    Replicate())); the hidden states without an lm_head."""
    width = spec.vocab if spec.lm_head else spec.hidden
    if spec.lm_head and loss_parallel and tp > 1:
        width = -(-width // tp)
    return dtype_bytes * micro_batch * (seq_len // cp) * width


def pipeline_stage_bytes(rank_stages: tuple[int, ...], num_stages: int, num_microbatches: int, inflight: float,
                         boundary_bytes: int, output_bytes: int, keeps_outputs: bool) -> tuple[float, float]:
    """(activations, buffers) torch.distributed.pipelining adds on a pipeline rank running the
    virtual stages `rank_stages` (torch 2.13 torch/distributed/pipelining/stage.py):
    - one activation-receive buffer per micro-batch for every stage but the first and one
      gradient-receive buffer per micro-batch for every stage but the last, allocated once
      (`_prepare_forward_infra`: args_recv_info[chunk] = _create_act_recv_info(), and
      `_setup_backward_recv_info`: grad_recv_info[mb] = _create_grad_recv_info(), each with
      `_make_tensor_from_meta`); the `inflight` received inputs in use are the first block's
      inputs, already among the blocks' activations;
    - `fwd_cache[chunk] = (output_tuple, inputs)` keeps every in-flight micro-batch's stage output
      (a boundary tensor) until its backward;
    - the last stage appends every micro-batch's output (the logits) to `output_chunks` for the
      step's return value (`keeps_outputs`; torchtitan passes return_outputs=False from
      pytorch/torchtitan e5ef99aab, 2025-10-22), else only its in-flight ones are held."""
    activations = buffers = 0.0
    m = num_microbatches
    for stage in rank_stages:
        if stage > 0:
            buffers += max(m - inflight, 0.0) * boundary_bytes
        if stage < num_stages - 1:
            buffers += m * boundary_bytes
            activations += inflight * boundary_bytes
        else:
            activations += (m if keeps_outputs else inflight) * output_bytes
    return activations, buffers


def stage_memory(
    states: tuple[float, float, float],
    layers: int,
    inflight: float,
    terms: BlockTerms,
    is_first: bool,
    is_last: bool,
    groups: int,
    cost: CostModel,
    moe_terms: BlockTerms | None = None,
    moe_layers: int = 0,
    pipelined: bool = False,
    bucket_bytes: float = 0.0,
    stage: int = 0,
    pipeline_bytes: tuple[float, float] | None = None,
) -> StageMemory:
    """Memory of one stage's GPU: model states, `layers` blocks' activations for `inflight`
    micro-batches plus one block's working set, edge activations, buffers and allowances;
    `moe_layers` of the blocks are MoE blocks with `moe_terms`; a `pipelined` stage (pp > 1) keeps
    send/recv buffers; `bucket_bytes`: the engine's data-parallel staging buckets (DeepSpeed);
    `stage` is the pipeline rank; `pipeline_bytes`: (activations, buffers) of an engine whose
    pipeline runtime keeps per-micro-batch buffers (`pipeline_stage_bytes`), the buffers at least
    the two messages counted otherwise. Of `terms` only the five byte fields are read (the
    search's floor passes `memory_floor.BlockBytes`)."""
    weights, gradients, optimizer = states
    block_bytes = (layers - moe_layers) * terms.activation_bytes
    working = terms.working_bytes
    if moe_terms is not None and moe_layers:
        block_bytes += moe_layers * moe_terms.activation_bytes
        working = max(working, moe_terms.working_bytes)
    activations = inflight * block_bytes + working
    if is_first:
        activations += inflight * terms.embedding_activation_bytes
    if is_last:
        activations += terms.head_activation_bytes
    # NCCL buffers per communicator; pipeline ranks also keep send/recv buffers of one activation
    p2p = 2 * terms.boundary_bytes if pipelined else 0
    if pipelined and pipeline_bytes is not None:
        activations += pipeline_bytes[0]
        p2p = max(p2p, pipeline_bytes[1])
    nccl = float(groups * cost.nccl_buffer_bytes_per_group)
    comm = nccl + p2p + bucket_bytes
    allocated = weights + gradients + optimizer + activations + comm
    # the caching allocator fragments around the tensors that come and go (activations, buffers);
    # model states are allocated once, as a few large contiguous buffers (Megatron's param and
    # grad buffers, FSDP's flat shards)
    fragmentation = (activations + comm) * cost.fragmentation_fraction
    reserved = float(cost.runtime_reserved_bytes)
    return StageMemory(stage, weights, gradients, optimizer, activations, comm, fragmentation, reserved,
                       allocated + fragmentation + reserved, nccl)


