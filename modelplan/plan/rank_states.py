"""What each pipeline rank holds under a plan: its parameter units (the schedule's layout,
`plan/stages.py`), their shard counts (`plan/shard.py`, what verify checks the executor against)
and the model-state bytes ZeRO leaves on one GPU (`parallel/dp_zero.py`). Dense parameters are
split over tp, routed experts over tp and ep; ZeRO shards dense states over the dp x cp ranks
that reduce their gradients and expert states over the dp x cp / ep ranks holding the same
experts (Megatron-core's expert data-parallel group).
"""

from __future__ import annotations

from itertools import repeat

from modelplan.count.blocks import block_of
from modelplan.plan.engine import MEGATRON_2021, EngineSettings, keeps_low_precision_grads
from modelplan.plan.fsdp import UNITS_IN_FLIGHT, zero3_mode
from modelplan.plan.parallel import dp_zero
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.shard import unit_shards
from modelplan.plan.stages import rank_units
from modelplan.specs.plan import Plan, Schedule
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


class RankStates:
    """Units, parameters and model-state bytes per pipeline rank for one model and training spec (cached)."""

    def __init__(self, spec: TransformerSpec, training: TrainingSpec, software: EngineSettings = MEGATRON_2021) -> None:
        self.spec, self.training, self.software = spec, training, software
        self.dtype_bytes, self.grad_bytes = training.dtype_bytes, training.grad_bytes
        self.state_bytes = dp_zero.state_bytes_per_param(training.optimizer_states, training.uses_master_weights,
                                                         training.optimizer_state_bytes)
        self._cache: dict[tuple, object] = {}
        self._ids: dict[tuple, int] = {}
        self.finetune = None
        if training.finetune is not None and training.finetune.uses_adapters:
            from modelplan.plan.finetune import FinetunePlanner

            self.finetune = FinetunePlanner(spec, training)

    def _memo(self, key: tuple, make):
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = make()
        return hit

    def rank_units(self, schedule: str, pp: int, vpp: int, split=None) -> list[list[str]]:
        """Units each pipeline rank holds under the schedule's layout (`plan/stages.py`; `split`:
        the plan's first / last stage blocks)."""
        return self._memo(("rank_units", schedule, pp, vpp, split),
                          lambda: rank_units(self.spec, schedule_layout(schedule, pp, vpp), split))

    def unit_kinds(self, schedule: str, pp: int, vpp: int, split=None) -> list[tuple[int, tuple[tuple[str, int], ...]]]:
        """Per pipeline rank (id, ((unit, count), ...)): its units with the alike ones merged (every
        block of one kind, `count.blocks.Block`, holds a unit of the same size, its expert set too), in order of
        first appearance; the id is shared by ranks and layouts holding the same kinds."""
        def kinds():
            kind_of = self._memo(("kind_of",), self._kind_of)
            out = []
            for names in self.rank_units(schedule, pp, vpp, split):
                merged: dict[str, list] = {}
                for unit in names:
                    kind = kind_of.get(unit, unit)
                    merged.setdefault(kind, [unit, 0])[1] += 1
                sig = tuple((unit, count) for unit, count in merged.values())
                out.append((self._ids.setdefault(tuple((k, c) for k, (_, c) in merged.items()), len(self._ids)),
                            sig))
            return out

        return self._memo(("unit_kinds", schedule, pp, vpp, split), kinds)

    def rank_blocks(self, schedule: str, pp: int, vpp: int, split=None) -> list[int]:
        """Transformer blocks each pipeline rank holds under the schedule's layout (and stage split)."""
        return self._memo(("rank_blocks", schedule, pp, vpp, split), lambda: [
            sum(1 for u in names if u.startswith("layers/") and not u.endswith("/experts"))
            for names in self.rank_units(schedule, pp, vpp, split)])

    def _kind_of(self) -> dict[str, object]:
        """The kind of every block unit: its `count.blocks.Block` (alike blocks are the same size),
        ('experts', block) for its expert set (other units are their own)."""
        out: dict[str, object] = {}
        for i in range(self.spec.num_blocks):
            block = block_of(self.spec, i)
            out[f"layers/{i}"] = block
            out[f"layers/{i}/experts"] = ("experts", block)
        return out

    def rank_params(self, tp: int, pp: int, ep: int = 1, schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1,
                    etp: int | None = None, split=None) -> tuple[list[tuple[int, int]], int, int]:
        """Per pipeline rank (dense, routed-expert) parameters on one GPU under the schedule's
        layout, and the largest block's dense and expert parameters (`plan/shard.py` counts;
        `etp`: the routed experts' tensor-parallel size, None: tp)."""
        def count():
            numel, experts, dense, expert = self._memo(("unit_numels", tp, ep, etp),
                                                       lambda: self._unit_numels(tp, ep, etp))
            return [_params_of(names, numel, experts) for names in self.rank_units(schedule, pp, vpp, split)], dense, expert

        return self._memo(("rank_params", tp, pp, ep, schedule, vpp, etp, split), count)

    def rank_param(self, tp: int, pp: int, ep: int, schedule: str, vpp: int, etp: int | None, split,
                   pp_rank: int) -> tuple[int, int]:
        """`rank_params` of one pipeline rank, counted alone when the others are not (cached: the
        search's memory floor reads only the first rank of most layouts)."""
        full = self._cache.get(("rank_params", tp, pp, ep, schedule, vpp, etp, split))
        if full is not None:
            return full[0][pp_rank]

        def count():
            numel, experts = self._memo(("unit_numels", tp, ep, etp), lambda: self._unit_numels(tp, ep, etp))[:2]
            return _params_of(self.rank_units(schedule, pp, vpp, split)[pp_rank], numel, experts)

        return self._memo(("rank_param", tp, pp, ep, schedule, vpp, etp, split, pp_rank), count)

    def _unit_numels(self, tp: int, ep: int, etp: int | None = None) -> tuple[dict[str, int], set[str], int, int]:
        """(numel per unit, the routed-expert units, largest block's dense and expert numel); the
        element counts depend on tp, ep and etp only (dp = ep here: only the padding depends on dp)."""
        units = unit_shards(self.spec, Plan(tp=tp, dp=ep, ep=ep, etp=etp), self.training.framework)
        numel = {u: s.numel for u, s in units.items()}
        experts = {u for u in units if u.endswith("/experts")}
        layers = range(self.spec.num_blocks)
        dense = max(numel.get(f"layers/{i}", 0) for i in layers)  # ALBERT: reused blocks hold none
        expert = max((numel[f"layers/{i}/experts"] for i in layers if f"layers/{i}/experts" in numel), default=0)
        return numel, experts, dense, expert

    def uniform_blocks(self, tp: int, ep: int = 1, etp: int | None = None) -> bool:
        """Every block holds the same dense parameters and the same routed-expert parameters (a
        stage's parameters then follow its block count alone)."""
        numel = self._memo(("unit_numels", tp, ep, etp), lambda: self._unit_numels(tp, ep, etp))[0]
        layers = range(self.spec.num_blocks)
        return (len({numel.get(f"layers/{i}", 0) for i in layers}) == 1
                and len({numel.get(f"layers/{i}/experts", 0) for i in layers}) == 1)

    def params(self, tp: int, pp: int) -> tuple[int, int, int, int]:
        """(per block, first stage, last stage, word embedding) parameters on one rank (ep = 1)."""
        per_rank, layer, expert = self.rank_params(tp, pp)
        numel = self._memo(("unit_numels", tp, 1), lambda: self._unit_numels(tp, 1))[0]
        return layer + expert, sum(per_rank[0]), sum(per_rank[-1]), numel.get("embedding/word", 0)

    def rank_states(self, tp: int, pp: int, dp: int, zero: int, pp_rank: int, ep: int = 1, cp: int = 1,
                    schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1, reshard: bool | str = "default",
                    shard: int | None = None, etp: int | None = None, split=None) -> tuple[float, float, float]:
        """Model-state bytes (weights, gradients, optimizer) of one GPU of rank `pp_rank`: dense
        parameters sharded by ZeRO over the dp x cp ranks that reduce their gradients (the HSDP
        shard group of `shard` ranks when given), routed experts over the dp x cp / ep ranks holding
        the same experts (`parallel/dp_zero.py`; with `etp` the tp x dp x cp / (ep x etp) ranks of
        Megatron-core's expert-data-parallel group); ZeRO-3 as the engine runs it (`plan/fsdp.py`,
        `reshard`: the plan's reshard_after_forward); Transformer Engine's cached fp8 weights."""
        dense, experts = self.rank_param(tp, pp, ep, schedule, vpp, etp, split, pp_rank)
        if self.finetune is not None:  # frozen base, adapter states (`plan/finetune.py`)
            blocks = self.rank_blocks(schedule, pp, vpp, split)[pp_rank]
            return self.finetune.states(dense, blocks, tp, shard or dp * cp, zero)
        # ranks and layouts holding the same parameters under the same sharding share the bytes
        fp8 = self._fp8_gathered(tp, pp, ep, schedule, vpp, etp, split, pp_rank, reshard) if zero >= 3 else 0
        te = self._memo(("te_fp8", tp, ep, etp, schedule, pp, vpp, split, pp_rank), lambda: self._te_fp8_params(
            tp, ep, etp, self.rank_units(schedule, pp, vpp, split)[pp_rank]))
        key = ("held", dense, experts, tp, ep, etp, dp * cp, zero, (reshard, pp, shard, fp8) if zero >= 3 else None, te)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._held_bytes(dense, experts, tp, pp, dp, zero, ep, cp, reshard, shard, etp,
                                                      fp8, te)
        if zero >= 3 and pp_rank == pp - 1 and self.software.head_stays_gathered \
                and zero3_mode(reshard, self.software, pp).reshard_after_forward:
            # the output head stays gathered from its forward to its backward (the loss's peak)
            numel = self._memo(("unit_numels", tp, ep, etp), lambda: self._unit_numels(tp, ep, etp))[0]
            head = numel.get("head", numel.get("embedding/word", 0) if self.spec.tied_embeddings else 0)
            hit = (hit[0] + self.dtype_bytes * head, *hit[1:])
        if zero >= 3 and pp == 1 and self.software.fsdp_ends_in_root:
            hit = self._root_ends(hit, tp, ep, etp, zero3_mode(reshard, self.software, pp).reshard_after_forward)
        return hit

    def _root_ends(self, hit: tuple[float, float, float], tp: int, ep: int, etp: int | None,
                   resharded: bool) -> tuple[float, float, float]:
        """`hit` with FSDP2's root group holding the embedding and the head (`TrainingSpec.fsdp_ends_in_root`):
        the word embedding gathered beside the head (when the blocks are resharded; otherwise it is
        gathered already) and the head's unsharded 16-bit gradient, reduce-scattered only at the end of backward."""
        numel = self._memo(("unit_numels", tp, ep, etp), lambda: self._unit_numels(tp, ep, etp))[0]
        word = numel.get("embedding/word", 0)
        head = numel.get("head", word if self.spec.tied_embeddings else 0)
        gathered = word if resharded and not self.spec.tied_embeddings else 0
        return hit[0] + self.dtype_bytes * gathered, hit[1] + self.dtype_bytes * head, hit[2]

    def _fp8_gathered(self, tp: int, pp: int, ep: int, schedule: str, vpp: int, etp: int | None, split,
                      pp_rank: int, reshard: bool | str) -> int:
        """Parameters ZeRO-3 holds gathered that torchao's float8 all-gather gathers as fp8: the
        blocks' dense parameters (Float8Linear weights; torchtitan and benchmark_litgpt leave the
        embedding and the output head unconverted), `UNITS_IN_FLIGHT` blocks when units are
        resharded after forward, every block of the rank when they are kept to backward
        (`fsdp.zero3_state_bytes` then keeps the whole stage gathered)."""
        numel, experts, layer, _ = self._memo(("unit_numels", tp, ep, etp), lambda: self._unit_numels(tp, ep, etp))
        if zero3_mode(reshard, self.software, pp).reshard_after_forward:
            return UNITS_IN_FLIGHT * layer
        names = self.rank_units(schedule, pp, vpp, split)[pp_rank]
        return sum(numel.get(n, 0) for n in names if n.startswith("layers/") and n not in experts)

    def _te_fp8_params(self, tp: int, ep: int, etp: int | None, names: list[str]) -> int:
        """Parameters of `names` Transformer Engine keeps fp8 copies of under TE fp8 (0 otherwise):
        the blocks' (and MTP modules') linear weights, routed experts too; the word embedding
        (`VocabParallelEmbedding`) and the output layer (`tensor_parallel.ColumnParallelLinear`,
        megatron-core models/gpt/gpt_model.py) are not TE modules, so `fp8_autocast` leaves them
        16-bit. The blocks' norm weights (2 h of ~12 h^2) are counted with them, as
        `fp8.param_gather_bytes` does."""
        if self.software.fp8_recipe is None or self.software.fp8_backend != "te":
            return 0
        numel = self._memo(("unit_numels", tp, ep, etp), lambda: self._unit_numels(tp, ep, etp))[0]
        return sum(numel.get(n, 0) for n in names if n.split("/")[0] in ("layers", "mtp"))

    def _held_bytes(self, dense: int, experts: int, tp: int, pp: int, dp: int, zero: int, ep: int, cp: int,
                    reshard: bool | str, shard: int | None, etp: int | None,
                    fp8_gathered: int = 0, te_fp8: int = 0) -> tuple[float, float, float]:
        """`rank_states` of a rank holding `dense` and `experts` parameters (no fine-tune);
        `fp8_gathered`: its gathered parameters the float8 all-gather holds in fp8; `te_fp8`: its
        parameters Transformer Engine keeps fp8 copies of (`_te_fp8_params`)."""
        layer, expert_layer = self._memo(("unit_numels", tp, ep, etp), lambda: self._unit_numels(tp, ep, etp))[2:]
        sizes = (self.dtype_bytes, self.grad_bytes, self.state_bytes)
        sw = self.software
        group = dp * cp
        reduce_bytes = 4 if sw.reduce_in_fp32 else self.dtype_bytes
        zero3 = (zero3_mode(reshard, sw, pp), shard or group, sw.sharded_low_precision_copy, reduce_bytes) \
            if zero >= 3 else None  # read by ZeRO-3 alone
        a = dp_zero.state_bytes(dense, layer, group, zero, *sizes, zero3=zero3)
        expert_group = tp * group // (ep * etp) if etp else group // ep
        b = dp_zero.state_bytes(experts, expert_layer, expert_group, zero, *sizes, zero3=zero3)
        weights, gradients, optimizer = a[0] + b[0], a[1] + b[1], a[2] + b[2]
        if keeps_low_precision_grads(sw, zero, self.training.precision, self.grad_bytes):
            gradients += self.dtype_bytes * (dense + experts)  # the bf16 .grad beside the fp32 buffer
        if sw.fp8_recipe is not None and sw.fp8_backend == "te":
            # TE keeps fp8 weights and their transposes (cached across micro-batches, 1 + 1 B) of
            # its modules' weights; with fp8_param_gather they are the parameters and no 16-bit
            # copy of them exists. The amax histories (fp32, DelayedScaling amax_history_len: TE
            # 1024, Megatron --fp8-amax-history-len 1, three tensors per linear) are <= 12 KB per
            # linear layer, not counted
            weights += 2 * te_fp8
            if self.training.fp8_param_gather and zero < 3:
                weights -= self.dtype_bytes * te_fp8
        elif sw.fp8_recipe is not None and self.training.fp8_param_gather and zero >= 3:
            # torchao fp8 all-gather: the gathered blocks are fp8 (1 byte) instead of 16-bit
            weights -= (self.dtype_bytes - 1) * fp8_gathered
        return weights, gradients, optimizer

    def states(self, tp: int, pp: int, dp: int, zero: int, ep: int = 1, cp: int = 1,
               schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1, reshard: bool | str = "default",
               shard: int | None = None, etp: int | None = None, split=None
               ) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """Model-state bytes (weights, gradients, optimizer) of the first and the last pipeline rank
        (with the default 1F1B layout, the least any schedule holds: the search's lower bound)."""
        return self._memo(("states", tp, pp, dp, zero, ep, cp, schedule, vpp, reshard, shard, etp, split), lambda: (
            self.first_states(tp, pp, dp, zero, ep, cp, schedule, vpp, reshard, shard, etp, split),
            self.rank_states(tp, pp, dp, zero, pp - 1, ep, cp, schedule, vpp, reshard, shard, etp, split)))

    def first_states(self, tp: int, pp: int, dp: int, zero: int, ep: int = 1, cp: int = 1,
                     schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1, reshard: bool | str = "default",
                     shard: int | None = None, etp: int | None = None, split=None) -> tuple[float, float, float]:
        """`rank_states` of the first pipeline rank, cached (the search's memory floor reads only it)."""
        return self._memo(("first", tp, pp, dp, zero, ep, cp, schedule, vpp, reshard, shard, etp, split),
                          lambda: self.rank_states(tp, pp, dp, zero, 0, ep, cp, schedule, vpp, reshard, shard, etp,
                                                   split))

    def groups(self, tp: int, pp: int, dp: int, ep: int, cp: int) -> int:
        """Communicators a GPU belongs to (each keeps NCCL buffers)."""
        groups = (tp > 1) + (dp * cp > 1) + (pp > 1) + (pp > 1 and self.spec.tied_embeddings)
        return groups + (ep > 1) + (1 < ep < dp * cp) + (cp > 1)  # expert, expert-data and context parallel



def _params_of(names: list[str], numel: dict[str, int], experts: set[str]) -> tuple[int, int]:
    """(dense, routed-expert) parameters of the units `names`."""
    total = sum(map(numel.get, names, repeat(0)))
    routed = sum(numel.get(u, 0) for u in names if u in experts) if experts else 0
    return total - routed, routed
