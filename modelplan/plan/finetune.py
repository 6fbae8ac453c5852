"""What a LoRA / QLoRA fine-tune changes in a plan (Hu et al. 2021; Dettmers et al. 2023).

The base model is frozen: its weights stay at the training precision (lora) or quantized
(qlora: NF4 with double quantization or int8, `count/quant.py`) and have no gradients and no
optimizer states. Only the adapters (lora_A: in x r, lora_B: r x out per adapted Linear) train:
    weights, gradients  adapters x adapter bytes (fp32: PEFT's autocast; bf16: qlora.py)
    optimizer states    adapters x 4 B x states (fp32 Adam m, v; no master copy: the adapters are it)
Parallelism (Megatron/NeMo ParallelLinearAdapter convention): TP splits an adapter like its base
layer (column-parallel base: lora_A replicated, lora_B split over its outputs; row-parallel base:
lora_A split over its inputs, lora_B replicated), PP splits the blocks, DP/ZeRO shard the
adapters' states and reduce only the adapters' gradients; ZeRO-3 (FSDP, as FSDP-QLoRA runs it)
also shards the frozen base and gathers it per block in forward and backward.
Compute: forward of the base + adapters; backward input gradients through every frozen GEMM
but weight gradients only for the adapters (a frozen matmul skips its wgrad: backward = 2 x
forward becomes 1 x forward for the base, so a step is about 2/3 of a full fine-tuning step's
FLOPs, Kaplan et al. 2020's 6N per token minus the 2N of weight gradients). Every block
back-propagates its input gradient; autograd also skips those below the first adapter (block 0's
frozen projections reading the embedding, about 0.4% of a Llama-2-7B step), which are counted here
(PyTorch's FlopCounterMode on a PEFT model agrees to the FLOP once that term is written out,
tests/test_plan_finetune.py). The r-wide adapter
GEMMs run as real (memory-bound) GEMMs on the roofline; the adapter's tp partial sums (one
tokens x r AllReduce per adapted module) are not priced (r << h). Activations: the base's, plus
each adapter's lora_A output (and with dropout its dropped input and mask) held for backward.
Modelled for dense decoder-only transformers with adapters inside the blocks.
"""

from __future__ import annotations

from modelplan.comm.ops import Axis, Collective
from modelplan.comm.regions import Region
from modelplan.count.linears import Linear, linear_modules
from modelplan.count.lora import count_lora, matched_modules
from modelplan.count.params import count_params
from modelplan.count.quant import quantized_linears, quantized_tensor_bytes
from modelplan.errors import SpecError
from modelplan.plan.kernels import Gemm, head_kernels, layer_kernels
from modelplan.plan.parallel.calls import RankCalls
from modelplan.specs.finetune import FinetuneSpec
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

ROW_PARALLEL = frozenset({"o_proj", "c_proj", "out_proj", "dense", "down_proj", "fc2", "dense_4h_to_h"})
"""Output projections Megatron splits over their inputs (row-parallel); every other block
linear is column-parallel (split over its outputs)."""
FP32 = 4


def check_plannable(spec: TransformerSpec, training: TrainingSpec) -> None:
    """A LoRA / QLoRA plan is modelled for dense decoder-only models (one-line error otherwise)."""
    ft = training.finetune
    what = f"--finetune {ft.method}"
    if spec.moe is not None:
        raise SpecError(f"{what}: planning adapters on an MoE model ({spec.name}) is not modelled "
                        "(count --finetune gives its counts and memory)")
    if spec.arch == "encoder_decoder" or spec.mtp_layers:
        raise SpecError(f"{what}: planning is modelled for decoder-only models without MTP, not {spec.name}")


class FinetunePlanner:
    """Per-TP-rank adapter and frozen-base sizes, FLOPs and calls of one fine-tune (cached by tp)."""

    def __init__(self, spec: TransformerSpec, training: TrainingSpec) -> None:
        check_plannable(spec, training)
        self.spec, self.training = spec, training
        self.finetune: FinetuneSpec = training.finetune
        self.lora = count_lora(spec, self.finetune, count_params(spec).total)
        self.modules = linear_modules(spec, self.lora.layout)  # type: ignore[arg-type]
        adapted = matched_modules(self.modules, tuple(self.lora.targets))
        outside = sorted(m.path for m in adapted if not m.in_block)
        if outside:
            raise SpecError(f"lora_targets: adapters outside the blocks ({', '.join(outside)}) are not planned")
        self.adapted = adapted
        self.rank = self.lora.rank
        self.adapter_bytes = self.finetune.adapter_bytes
        self.state_bytes = FP32 * training.optimizer_states  # fp32 m (and v); the adapters are their own master
        self.dtype_bytes = training.dtype_bytes
        self._by_tp: dict[tuple[str, int], int] = {}

    def _cached(self, what: str, tp: int, make) -> int:
        key = (what, tp)
        hit = self._by_tp.get(key)
        if hit is None:
            hit = self._by_tp[key] = make()
        return hit

    # -- sizes on one TP rank -----------------------------------------------------------------

    def _shard(self, m: Linear, tp: int) -> tuple[int, int]:
        """(in, out) features of module `m` on one TP rank (row-parallel splits in, column out)."""
        if m.name in ROW_PARALLEL:
            return m.in_features // tp, m.out_features
        return m.in_features, m.out_features // tp

    def _per_block(self, m: Linear) -> float:
        return m.count / self.spec.layers

    def adapter_params_per_block(self, tp: int) -> int:
        """Adapter parameters of one block on one TP rank: r (in + out) of each adapted module,
        the split factor divided by tp (Hu et al. eq. 3; ParallelLinearAdapter)."""
        return self._cached("adapters", tp, lambda: self._adapter_params_per_block(tp))

    def _adapter_params_per_block(self, tp: int) -> int:
        out = 0.0
        for m in self.adapted:
            fan_in, fan_out = self._shard(m, tp)
            out += self._per_block(m) * self.rank * (fan_in + fan_out)
        return round(out)

    def frozen_saving_per_block(self, tp: int) -> int:
        """Bytes a quantized base saves per block on one TP rank against the training dtype
        (`count/quant.py` per tensor, its block constants split evenly over tp); 0 for lora."""
        return self._cached("saving", tp, lambda: self._frozen_saving_per_block(tp))

    def _frozen_saving_per_block(self, tp: int) -> int:
        fmt = self.finetune.frozen_format
        if fmt == "training":
            return 0
        d = self.dtype_bytes
        saved = 0.0
        for m in quantized_linears(self.modules):
            quant = quantized_tensor_bytes(m, fmt, self.finetune.double_quant)  # type: ignore[arg-type]
            saved += self._per_block(m) * (m.weight_numel * d - quant) / tp
        return round(saved)

    def frozen_bytes(self, params: int, blocks: int, tp: int) -> int:
        """Frozen weights of `params` base parameters on one rank holding `blocks` blocks."""
        return params * self.dtype_bytes - blocks * self.frozen_saving_per_block(tp)

    def adapter_activation_bytes(self, tp: int, micro_batch: int, seq_len: int) -> int:
        """Bytes the adapters of one block keep per micro-batch on one TP rank: lora_A's r-wide
        output (replicated over tp), and with dropout the dropped input (dtype) and its mask."""
        d = self.dtype_bytes
        dropout = self.finetune.lora_dropout > 0
        per_token = 0.0
        for m in self.adapted:
            fan_in, _ = self._shard(m, tp)
            per_token += self._per_block(m) * (self.rank * d + ((d + 1) * fan_in if dropout else 0))
        return round(per_token * micro_batch * seq_len)

    # -- compute ------------------------------------------------------------------------------

    def adapter_gemms(self, tp: int, tokens: int) -> list[Gemm]:
        """One block's adapter GEMMs on one TP rank: x @ A (tokens, in) @ (in, r), then
        (tokens, r) @ (r, out)."""
        out = []
        for m in self.adapted:
            fan_in, fan_out = self._shard(m, tp)
            for _ in range(round(self._per_block(m))):
                out.append(Gemm(f"{m.path}/lora_A", tokens, self.rank, fan_in))  # (T, in) @ (in, r)
                out.append(Gemm(f"{m.path}/lora_B", tokens, fan_out, self.rank))  # (T, r) @ (r, out)
        return out

    def kernel_times(self, times, tp: int, sequence_parallel: bool, micro_batch: int, cp: int,
                     vocab_padded: int, roofline, attention: str, elementwise: str):
        """`compute.KernelTimes` of a fine-tune: the frozen linears' and head's weight-gradient
        GEMMs removed, the adapters' forward and backward GEMMs added."""
        spec, d, seq = self.spec, self.dtype_bytes, self.training.seq_len
        k = layer_kernels(spec, tp, micro_batch, seq, d, sequence_parallel, cp=cp, attention=attention,
                          elementwise=elementwise)
        frozen_wgrad = sum(roofline.gemm_time_s(g.backward()[1], d) for g in k.gemms if g not in k.attention_core_gemms)
        head_gemms, _ = head_kernels(spec, tp, micro_batch, seq // cp, d, vocab_padded, elementwise)
        head_wgrad = sum(roofline.gemm_time_s(g.backward()[1], d) for g in head_gemms)
        lora = self.adapter_gemms(tp, micro_batch * seq // cp)
        lora_f = sum(roofline.gemm_time_s(g, d) for g in lora)
        lora_b = sum(roofline.gemm_time_s(x, d) for g in lora for x in g.backward())
        dequant = self.dequantize_s(tp, roofline)
        return times._replace(fwd_gemm_s=times.fwd_gemm_s + lora_f,
                              bwd_gemm_s=times.bwd_gemm_s - frozen_wgrad + lora_b,
                              fwd_elementwise_s=times.fwd_elementwise_s + dequant,
                              bwd_elementwise_s=times.bwd_elementwise_s + dequant,
                              linear_fwd_s=times.linear_fwd_s + lora_f,
                              head_bwd_s=times.head_bwd_s - head_wgrad)

    def dequantize_s(self, tp: int, roofline) -> float:
        """qlora: one block's weights dequantized to the compute dtype before each use, forward
        and backward (bitsandbytes Linear4bit / Linear8bitLt in training: dequantize, then a
        16-bit GEMM), memory-bound: read the quantized bytes, write the 16-bit weight; 0 for lora."""
        saving = self.frozen_saving_per_block(tp)
        if not saving:
            return 0.0
        dense = sum(self._per_block(m) * m.weight_numel for m in quantized_linears(self.modules)) / tp
        written = dense * self.dtype_bytes
        kernels = sum(round(self._per_block(m)) for m in quantized_linears(self.modules))
        return kernels * roofline.overhead_s + roofline.memory_time_s(2 * written - saving)

    def flops_per_sequence(self, model: float, hardware: float, recompute: str) -> tuple[float, float]:
        """(model, hardware) FLOPs of one sequence from full training's: minus the frozen
        matmuls' weight gradients (2 x tokens x weights, one multiply-add per weight), plus the
        adapters' 6 x tokens x adapter params (and one more forward under full recompute)."""
        tokens = self.training.seq_len
        frozen_wgrad = 2 * tokens * sum(m.count * m.weight_numel for m in self.modules)
        adapters = 2 * tokens * self.lora.trainable_params  # forward of every adapter
        rerun = adapters if recompute == "full" else 0
        return model - frozen_wgrad + 3 * adapters, hardware - frozen_wgrad + 3 * adapters + rerun

    # -- data parallel and model states ---------------------------------------------------------

    def dp_calls(self, calls: RankCalls, blocks: int, tp: int, group: int, zero: int, frozen_rest: int) -> None:
        """A rank's data-parallel calls for one micro-batch (`dp_zero.dp_seconds` prices them):
        per block the adapters' gradients (AllReduce, or ReduceScatter under ZeRO), their
        AllGather after the update (ZeRO 1, 2), and under ZeRO-3 the gather of the block's
        frozen base with its adapters before forward and backward; `frozen_rest`: the rank's
        frozen bytes outside the blocks (embedding, head), gathered too under ZeRO-3."""
        grad = self.adapter_params_per_block(tp) * self.adapter_bytes
        if zero == 0:
            calls.add(Collective.ALL_REDUCE, Axis.DP, group, grad, blocks, Region.DP_GRADS, overlap=True)
            return
        calls.add(Collective.REDUCE_SCATTER, Axis.DP, group, grad, blocks, Region.DP_GRADS, overlap=True)
        if zero < 3:
            calls.add(Collective.ALL_GATHER, Axis.DP, group, grad, blocks, Region.DP_PARAMS, overlap=True)
            return
        unit = grad + self.frozen_block_bytes(tp)
        calls.add(Collective.ALL_GATHER, Axis.DP, group, unit, 2 * blocks, Region.DP_PARAMS, overlap=True)
        if frozen_rest:
            calls.add(Collective.ALL_GATHER, Axis.DP, group, frozen_rest, 2, Region.DP_PARAMS, overlap=True)

    def frozen_block_bytes(self, tp: int) -> int:
        """One block's frozen base weights on one TP rank, as stored (quantized for qlora)."""
        params = self._cached("block", tp, lambda: self._block_params(tp))
        return params * self.dtype_bytes - self.frozen_saving_per_block(tp)

    def _block_params(self, tp: int) -> int:
        from modelplan.plan.shard import unit_shards
        from modelplan.specs.plan import Plan

        units = unit_shards(self.spec, Plan(tp=tp))
        return max(units[f"layers/{i}"].numel for i in range(self.spec.layers))

    def states(self, params: int, blocks: int, tp: int, group: int, zero: int) -> tuple[float, float, float]:
        """(weights, gradients, optimizer) bytes on one GPU of a rank holding `params` base
        parameters in `blocks` blocks: the frozen base (sharded only by ZeRO-3, which then also
        holds two gathered blocks), and the adapters' states under ZeRO's usual rule."""
        from modelplan.plan.parallel.dp_zero import state_bytes

        per_block = self.adapter_params_per_block(tp)
        weights, grads, opt = state_bytes(blocks * per_block, per_block, group, zero, self.adapter_bytes,
                                          self.adapter_bytes, self.state_bytes)
        frozen = self.frozen_bytes(params, blocks, tp)
        if zero >= 3:
            frozen = frozen / group + 2 * self.frozen_block_bytes(tp)
        return weights + frozen, grads, opt

    def optimizer_bytes_per_param(self) -> int:
        """HBM bytes of one optimizer step per adapter parameter (`dp_zero`'s rule, no master copy)."""
        from modelplan.plan.parallel.dp_zero import optimizer_bytes_per_param

        a = self.adapter_bytes
        return optimizer_bytes_per_param(a, self.state_bytes, a, master_weights=False)
