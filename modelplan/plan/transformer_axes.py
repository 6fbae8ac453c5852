"""The transformer family's axes for the one candidate walk (`candidates.walk`): beyond tp, pp and
dp its plans take context parallelism (by default every cp dividing the sequence from
LONG_SEQUENCE tokens on), expert parallelism (MoE: every ep dividing dp and num_experts; under a
fixed expert tensor-parallel size `etp` other than tp, every ep with ep x etp dividing tp x dp x cp,
Megatron-core's expert grid),
sequence parallelism (tp > 1) and a recompute policy, each the user's choice where the
`SearchSpace` names one; the rules are `validate.py`'s, as `TransformerEvaluator` states them."""

from __future__ import annotations

from modelplan.plan.candidates import FamilyAxes
from modelplan.plan.estimate import TransformerEvaluator
from modelplan.plan.problems import Problem
from modelplan.plan.space import LONG_SEQUENCE, SearchSpace, _choose, divisors
from modelplan.plan.stack_lengths import cp_length_problem, stack_lengths
from modelplan.plan.validate import cp_comm_problem, engine_pipeline_problem, ep_problem
from modelplan.specs.hardware import Cluster
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


class TransformerAxes(TransformerEvaluator, FamilyAxes):
    """A transformer's axes and rules over `gpus` GPUs of a search space."""

    def __init__(self, spec: TransformerSpec, training: TrainingSpec, cluster: Cluster, space: SearchSpace,
                 gpus: int) -> None:
        super().__init__(spec, training, cluster)
        self.space, self.gpus = space, gpus
        self.recomputes = tuple(space.recompute or ["none", "selective", "full"])
        self._sp_asked = space.sequence_parallel or [False, True]
        if space.etp is not None and len(space.etp) > 1:
            raise ValueError(f"etp: one size per search_family_plans (got {space.etp}; search_plans searches a list)")
        self.etp = space.etp[0] if space.etp and space.etp[0] != "tp" else None
        """The search's expert tensor-parallel size (one per search, `plan/etp_search.py`; None: tp)."""

    def etp_at(self, tp: int) -> int | None:
        """The points' `PlanPoint.etp` at this tp: None where the experts split over tp."""
        return None if self.etp in (None, tp) else self.etp

    def cps(self, tp: int) -> list[int]:
        n, seq = self.gpus, self.training.seq_len
        default = [1]
        if seq >= LONG_SEQUENCE and n % tp == 0:  # the rule stated at LONG_SEQUENCE
            lengths = stack_lengths(self.spec, self.training)  # cp divides both stacks' sequences
            default = [c for c in divisors(n // tp) if cp_length_problem(lengths, c) is None]
        return _choose(self.space.cp, default, n)

    def cp_problems(self, tp: int, cp: int) -> list[Problem]:
        problem = cp_length_problem(stack_lengths(self.spec, self.training), cp)
        out = [problem] if problem else []
        problem = cp_comm_problem(self.spec, self.training, tp, cp)
        return out + ([problem] if problem else [])

    def eps(self, dp: int, tp: int = 1, cp: int = 1) -> list[int]:
        moe, etp = self.spec.moe, self.etp_at(tp)
        if etp is not None:  # Megatron-core parallel_state: world % (etp x ep x pp) == 0
            ranks = tp * dp * cp // etp if (tp * dp * cp) % etp == 0 else 1
            default = [e for e in divisors(ranks) if moe.num_experts % e == 0] if moe is not None else [1]
            return _choose(self.space.ep, default, ranks)
        # expert parallelism lives inside dp
        default = [e for e in divisors(dp) if moe.num_experts % e == 0] if moe is not None else [1]
        return _choose(self.space.ep, default, dp)

    def ep_problem(self, dp: int, ep: int, tp: int = 1, cp: int = 1) -> Problem | None:
        return ep_problem(self.spec, dp, ep, tp, cp, self.etp_at(tp))

    def sps(self, tp: int) -> list[bool]:
        return [x for x in self._sp_asked if tp > 1 or not x] or [False]

    def schedule_problem(self, schedule: str, pp: int) -> Problem | None:
        return engine_pipeline_problem(self.training.framework, pp, 0, schedule)
