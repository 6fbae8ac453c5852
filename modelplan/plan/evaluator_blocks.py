"""One block, the embedding and the head, per micro-batch on one TP rank: kernels, recompute, exposed TP / EP / CP.

Split out of `plan/evaluator.py`: each term is one module's (`compute.py` kernels, `parallel/tp.py`,
`parallel/ep.py`, `parallel/cp.py`, `memory.py` activations), composed into a `stage_time.BlockTerms`."""

from __future__ import annotations

from modelplan.comm.ops import Axis
from modelplan.comm.tp_overlap import reduce_scatter_partials_bytes
from modelplan.count.blocks import Block, mtp_block
from modelplan.count.hyperconn import residual_width
from modelplan.plan.deepep import exchange_bytes
from modelplan.plan.block_mix import block_kinds, mean_terms, with_mtp
from modelplan.plan.block_passes import looped_times, passes_of, repeated
from modelplan.plan.compute import kernel_times
from modelplan.count.checkpointing import checkpointed_share, op_sac_recomputed_fraction, op_sac_recomputed_shares
from modelplan.plan.dims import strided_shape
from modelplan.plan.experts import expert_capacity
from modelplan.plan.deepep_experts_bias import with_deepep_experts_bias
from modelplan.plan.expert_sort import with_expert_sort
from modelplan.plan.fp8_padding import with_fp8_padding
from modelplan.plan.memory import block_activations, edge_activations
from modelplan.plan.parallel import cp as cp_mod, ep as ep_mod, pp as pp_mod, tp as tp_mod
from modelplan.plan.stack_lengths import StackLengths, stack_lengths
from modelplan.plan.stage_time import BlockTerms
from modelplan.plan.vision_tower import with_vision_tower
from modelplan.specs.plan import pipeline_scatter_gather


class BlockPricing:
    """The `Evaluator`'s per-block methods (its caches `_block_cache`, `_cache`). Each block kind
    runs on its stack's tokens per sequence (`lengths`: an encoder-decoder's decoder blocks and
    head on the target length, `plan/stack_lengths.py`)."""

    @property
    def lengths(self) -> StackLengths:
        """(source, target) tokens per sequence of the model's stacks (cached)."""
        return self._memo(("lengths",), lambda: stack_lengths(self.spec, self.training))

    def block_terms(self, tp: int, sp: bool, micro_batch: int, recompute: str, cp: int = 1,
                    ep: int | None = None, etp: int | None = None, tp_overlap: str = "none",
                    mtp_ep: int = 1) -> BlockTerms:
        """A dense block (or with `ep` an MoE block over ep ranks, its experts over `etp` ranks
        when that is not tp), the embedding and the head; block kinds mixed at the model's shares,
        the dense terms' head with the MTP modules (`block_mix.py`; an MoE MTP block over `mtp_ep`
        ranks); TP collectives overlapped under `tp_overlap` (`comm/tp_overlap.py`)."""
        key = (tp, sp, micro_batch, recompute, cp, ep, tp_overlap, etp, mtp_ep)
        hit = self._block_cache.get(key)
        if hit is None:
            hit = self._block_cache[key] = with_vision_tower(  # the first stage's tower (`vision_tower.py`)
                self._mixed_terms(tp, sp, micro_batch, recompute, cp, ep, etp, tp_overlap, mtp_ep), self.spec,
                self.training, self.roofline, micro_batch, recompute, self.software, tp, self.pricer,
                self.shapes(tp, 1, 1)[Axis.TP])
        return hit

    def kinds_of(self, moe: bool) -> list[tuple[Block, int]]:
        """The model's block kinds of one class (MoE or not) with their counts (`block_mix.py`; empty:
        the class's terms are its default block's, `memory.block_activations`)."""
        return self._memo(("block_kinds", moe), lambda: block_kinds(self.spec, moe))

    def block_bytes(self, tp: int, sp: bool, micro_batch: int, recompute: str, cp: int, moe: bool,
                    block: Block | None, etp: int | None = None) -> tuple[int, int]:
        """(bytes kept per in-flight micro-batch, transient bytes) of one block of a kind
        (`memory.block_activations` under the engine's settings; cached: the search's memory
        floor asks first); a recomputing block reuses the bytes it keeps without recompute."""
        key = ("block_bytes", tp, sp, micro_batch, recompute, cp, moe, block, etp)
        hit = self._cache.get(key)
        if hit is None:
            training, lengths = self.training, self.lengths
            none = None if recompute == "none" else self.block_bytes(tp, sp, micro_batch, "none", cp, moe, block, etp)[0]
            hit = self._cache[key] = block_activations(
                self.spec, micro_batch, lengths.of_block(block), self.dtype_bytes, tp, sp, recompute, moe,
                training.attention, cp, self.software, block, etp, none_bytes=none, memory_len=lengths.source)
        return hit

    def edge_bytes(self, tp: int, sp: bool, micro_batch: int, cp: int) -> tuple[int, int]:
        """(first stage, last stage) bytes per in-flight micro-batch (`memory.edge_activations`: the
        embedding on the source length, the head on the target's; cached)."""
        key = ("edge_bytes", tp, sp, micro_batch, cp)
        hit = self._cache.get(key)
        if hit is None:
            sw = self.software
            hit = self._cache[key] = edge_activations(
                self.spec, micro_batch, self.lengths.source, self.dtype_bytes, tp, sp, cp, sw.loss_kernel,
                sw.sp_saves_gathered_inputs, sw.loss_parallel, self.lengths.target, sw.loss_upcast)
        return hit

    def _mixed_terms(self, tp: int, sp: bool, b: int, recompute: str, cp: int, ep: int | None,
                     etp: int | None, tp_overlap: str, mtp_ep: int) -> BlockTerms:
        spec = self.spec
        kinds = self.kinds_of(ep is not None)
        if not kinds:
            terms = self._block_terms(tp, sp, b, recompute, cp, ep, None, etp, tp_overlap)
        else:
            terms = mean_terms([self._block_terms(tp, sp, b, recompute, cp, ep, block, etp, tp_overlap)
                                for block, _ in kinds], [n for _, n in kinds])
        if ep is None and spec.mtp_layers:
            block = mtp_block(spec)
            mtp = self._block_terms(tp, sp, b, "none", cp, mtp_ep if block.moe else None, block,
                                    etp if block.moe else None, tp_overlap)
            terms = with_mtp(terms, mtp, spec.mtp_layers)
        return terms

    def _block_terms(self, tp: int, sp: bool, b: int, recompute: str, cp: int, ep: int | None,
                     block: Block | None, etp: int | None = None, tp_overlap: str = "none") -> BlockTerms:
        spec, training, d, lengths = self.spec, self.training, self.dtype_bytes, self.lengths
        s = lengths.of_block(block)  # this kind's stack: an encoder-decoder's decoder blocks on the target
        s_local = s // cp
        tokens = b * s_local
        moe = ep is not None
        etp = etp if moe else None
        routed = tokens * etp // tp if etp else tokens  # tokens one rank dispatches
        capacity = expert_capacity(routed, spec.moe, self.capacity_factor) if moe else None
        sw = self.software
        times = self._memo(("kernel_times", tp, sp, b, cp, ep, etp, block), lambda: kernel_times(
            spec, tp, sp, b, s, d, self.vocab_padded(tp), self.roofline, moe_layer=moe,
            ep=ep or 1, capacity=capacity, cp=cp, attention=training.attention, software=sw,
            scaled_gemm_factor=self.cost.fp8_scaled_gemm_factor, block=block, etp=etp, memory_len=lengths.source,
            head_seq_len=lengths.target, embedding_seq_len=lengths.source))
        if moe:  # the all-to-all dispatcher's sort by local expert and back (`expert_sort.py`)
            times = with_expert_sort(times, self.roofline, sw.framework, training.moe_flex_dispatcher,
                                     spec.moe.num_experts, ep, capacity, spec.hidden, d)
            # fp8: TE's Fp8Padding / Fp8Unpadding copies of the experts' rows (`fp8_padding.py`)
            times = with_fp8_padding(times, self.roofline, sw.fp8_recipe, sw.framework, training.moe_flex_dispatcher,
                                     spec.moe.capacity_factor is None, spec.moe.num_experts, ep, capacity,
                                     spec.hidden, d)
            # AutoModel's DeepEP experts add their biases per local expert in PyTorch (`deepep_experts_bias.py`)
            times = with_deepep_experts_bias(times, self.roofline, spec, sw.framework, training.moe_flex_dispatcher,
                                             training.fake_balanced_gate, ep, capacity, etp or tp, d)
        ft = self.finetune
        if ft is not None:
            times = ft.kernel_times(times, tp, sp, b, cp, self.vocab_padded(tp), self.roofline, training.attention,
                                    sw.elementwise)
        passes = passes_of(spec, block)  # a looped block: one pass's terms x passes (`block_passes.py`)
        times = looped_times(times, spec, block, tokens, self.roofline, d)
        full = recompute == "full"
        # what 'selective' recomputes under this engine (`count/checkpointing.py`; MoE blocks: attention core)
        mode = "attention_core" if moe and sw.ac_mode == "op_sac" else sw.ac_mode
        if mode == "op_sac" and training.attention == "eager":
            mode = "attention_core"
        layer_level = recompute == "selective" and mode in ("layer_sac", "every_nth_block")
        recompute_s = times.recompute_s(recompute, mode, op_sac_recomputed_fraction(spec), sw.ac_every,
                                        sw.sac_saves_attention)
        rerun = 1.0 if full else (checkpointed_share(sw.ac_every) if layer_level else 0.0)
        act = tokens * spec.hidden * d  # one (b, s/cp, h) activation
        tp_shape = self.shapes(tp, 1, 1)[Axis.TP]
        gpn = self.cluster.domain_gpus
        gather = tokens * spec.hidden if sw.fp8_tp_gather and sp else None  # 1-byte fp8 AllGathers
        # sequence-parallel dispatch (`parallel/ep.py`): no f / g around the routed experts (a shared
        # expert keeps its own, `mlp_tp` None), the TP group's expert-buffer calls priced with the EP ones
        sp_dispatch = moe and ep_mod.sequence_parallel_dispatch(tp, sp, ep, etp)
        mlp_tp = (None if spec.moe.shared_experts else 1) if sp_dispatch else etp
        tp_t = repeated(self._memo(("tp", tp, sp, b, cp, etp, block, sp_dispatch), lambda: tp_mod.tp_seconds(
            self.pricer, tp_shape, tp, sp, act, tokens, tp_mod.LOSS_VALUE_BYTES, mlp_tp,
            strided_shape(etp, 1, gpn) if etp else None, gather, spec, block, d)), passes)
        if lengths.differ:  # every kind's terms carry the edges: the embedding's on the source, the head's on the target
            tp_t = tp_t._replace(embedding_s=self._edge_tp_s(tp, sp, b, cp, lengths.source).embedding_s,
                                 head_s=self._edge_tp_s(tp, sp, b, cp, lengths.target).head_s)
        if moe:
            sent = expert_capacity(tokens // tp, spec.moe, self.capacity_factor) if sp_dispatch else capacity
            # DeepEP: one copy per destination (`plan/deepep.py`), as the communication list
            a2a = exchange_bytes(ep_mod.dispatch_bytes(spec.moe.num_experts, sent, spec.hidden, d), spec.moe,
                                 training, ep, gpn)
            # Megatron-core's expert grid: etp fastest, then ep (stride etp); else ep inside dp
            ep_shape = strided_shape(ep, etp, gpn) if etp else self.shapes(tp, ep, 2, ep, cp)[Axis.EP]
            ep_x = repeated(ep_mod.ep_exposure(self.pricer, ep_shape, ep, a2a, full, tp if sp_dispatch else 1,
                                               tp_shape), passes)
            if training.ep_comm_overlap:  # merged 1F1B: AllToAlls under the other micro-batch's compute
                ep_x = ep_mod.overlapped(ep_x, times.fwd_gemm_s + times.fwd_elementwise_s + times.bwd_gemm_s
                                         + times.bwd_elementwise_s)
        else:
            ep_x = ep_mod.EpExposure(0.0, 0.0, 0.0)
        cp_type, torch_cp = sw.cp_comm_type, sw.cp_fp32_merge
        cp_x = cp_mod.cp_exposure(cp, cp_type, torch_cp, repeated(self.cp_seconds(tp, b, cp, s), passes) if cp > 1 else None,
                                  times.core_fwd_s, times.core_bwd_s, full, self.cost)
        stored, working = self.block_bytes(tp, sp, b, recompute, cp, moe, block, etp)
        if cp > 1:  # the exchange's transient buffers (`parallel/cp.py` working_bytes)
            kv, q = self.cp_block_bytes(tp, b, cp, s)
            working += cp_mod.working_bytes(cp, cp_type, torch_cp, kv, q, d)
        if ft is not None:  # lora_A outputs kept for backward (full recompute: only while recomputed)
            adapters = ft.adapter_activation_bytes(tp, b, s_local)
            stored, working = (stored, working + adapters) if full else (stored + adapters, working)
        emb_act, head_act = self.edge_bytes(tp, sp, b, cp)
        message, _ = self.boundary(tp, sp, b, cp, True)
        # per-op SAC saves reduce_scatter outputs, not all-gather ones: its recompute gathers again
        regather = tp_mod.regathers_inputs(recompute, mode, training.attention, sp, tp, block)
        if tp_overlap != "none" and sp and tp > 1:
            # the sum of a ring ReduceScatter's tp partials of one (b s, h) output (`comm/tp_overlap.py`)
            partials_s = self.roofline.overhead_s + self.roofline.memory_time_s(
                reduce_scatter_partials_bytes(tokens, spec.hidden, tp, d))
            tp_x = tp_mod.overlap_exposure(tp_t, rerun, self.cost, tp_overlap, self.mech.gemm_shares(moe),
                                           times.linear_fwd_s, tp, self.mech.sm_count,
                                           op_sac_recomputed_shares(spec) if regather else None, partials_s)
        else:
            tp_x = tp_mod.tp_exposure(tp_t, rerun, self.cost, None, tp, regather)
        return BlockTerms(times, recompute_s, tp_x, ep_x, cp_x, stored, working, emb_act, head_act, message)

    def _edge_tp_s(self, tp: int, sp: bool, b: int, cp: int, seq_len: int) -> tp_mod.TpSeconds:
        """TP seconds (`parallel/tp.py` TpSeconds) of a micro-batch of sequences of `seq_len`
        tokens (cached): what the embedding's and the head's calls cost on that stack's tokens."""
        def make():
            tokens = b * seq_len // cp
            return tp_mod.tp_seconds(self.pricer, self.shapes(tp, 1, 1)[Axis.TP], tp, sp,
                                     tokens * self.spec.hidden * self.dtype_bytes, tokens, tp_mod.LOSS_VALUE_BYTES)
        return self._memo(("edge_tp", tp, sp, b, cp, seq_len), make)

    def cp_block_bytes(self, tp: int, micro_batch: int, cp: int, seq_len: int | None = None) -> tuple[int, int]:
        """(K, V block, queries) bytes of this rank's tokens on one TP rank (`parallel/cp.py`) of
        sequences of `seq_len` (None: the source length); K, V at the query heads where the engine
        repeats them before attention (`sdpa_repeats_kv`)."""
        tokens = micro_batch * (self.lengths.source if seq_len is None else seq_len) // cp
        kv_heads = self.spec.heads if self.software.sdpa_repeats_kv else self.spec.num_kv_heads
        kv = cp_mod.kv_bytes(tokens, tp_mod.local_kv_heads(kv_heads, tp), self.spec.dim_head, self.dtype_bytes)
        return kv, cp_mod.q_bytes(tokens, self.spec.heads // tp, self.spec.dim_head, self.dtype_bytes)

    def cp_seconds(self, tp: int, micro_batch: int, cp: int, seq_len: int | None = None) -> cp_mod.CpSeconds:
        """One call of each context-parallel transfer of one block (of sequences of `seq_len`) on
        the cp group's links."""
        kv, q = self.cp_block_bytes(tp, micro_batch, cp, seq_len)
        return cp_mod.cp_seconds(self.pricer, cp, kv, q, self.shapes(tp, 1, 1, cp=cp)[Axis.CP], self.dtype_bytes,
                                 self.software.cp_fp32_merge)

    def boundary(self, tp: int, sp: bool, micro_batch: int, cp: int, scatter_gather: bool) -> tuple[int, int | None]:
        """(bytes sent, bytes the receiver all-gathers) of one stage-boundary tensor (`parallel/pp.py`; cached)."""
        key = ("boundary", tp, sp, micro_batch, cp, scatter_gather)
        hit = self._cache.get(key)
        if hit is None:
            s_local = self.training.seq_len // cp
            width = residual_width(self.spec)  # n h with hyper-connections (count/hyperconn.py)
            numel = micro_batch * (s_local // tp if sp else s_local) * width
            split = pipeline_scatter_gather(scatter_gather, tp, sp, numel)
            hit = self._cache[key] = pp_mod.boundary_message(micro_batch, s_local, width, tp, sp, split,
                                                             self.dtype_bytes)
        return hit
