"""DeepSpeed's synchronous TrainSchedule with blocking, paired p2p (issue 13, n18vtrain): a probe.

DeepSpeed's PipelineEngine (deepspeed/runtime/pipe/schedule.py `TrainSchedule`) runs
2 (m + pp - 1) steps; in each step a stage runs one forward or one backward (or idles): even
stages forward on even steps and backward on odd ones, odd stages the reverse
(`_step_to_micro_batch`). A forward stage first exchanges with the previous stage
(RecvActivation of this micro-batch, SendGrad of the last one), a backward stage with the next
(SendActivation of the last micro-batch, RecvGrad of this one); the instructions' notes say each
is blocking and paired. So at step k a stage and its partner (the neighbour it exchanges with)
both start when the later of them has finished step k - 1; a stage with nothing to exchange
starts as soon as it is free. `schedule_time_s` steps that rule with one stage's forward t_f and
backward t_b (recompute included), equal on every stage and communication taken as free.
Nothing in modelplan uses it: bench_vtrain_n18.py checks that it gives the 1F1B time modelplan
prices, i.e. that DeepSpeed's lockstep adds no bubble of its own.
"""

from __future__ import annotations


def micro_batch_of(step: int, stage: int, stages: int) -> tuple[int, bool]:
    """(micro-batch id, is_forward) of `stage` at `step`: DeepSpeed TrainSchedule._step_to_micro_batch
    and its four _{even,odd}_step_{forward,backward}_id helpers."""
    if step % 2 == 0 and stage % 2 == 0:
        return step // 2 - stage // 2, True
    if step % 2 == 1 and stage % 2 == 1:
        return (step - 1) // 2 - stage // 2, True
    if step % 2 == 0:  # odd stage, even step: backward
        return step // 2 - stages + (stage + 1) // 2, False
    return ((step - 1) // 2) - stages + 1 + stage // 2, False  # even stage, odd step: backward


def _exchanges(step: int, stage: int, stages: int, micro_batches: int) -> int | None:
    """The neighbour `stage` sends to or receives from at the start of `step`, or None
    (TrainSchedule.steps: the current or the previous step's micro-batch must be valid)."""
    mb, forward = micro_batch_of(step, stage, stages)
    prev_mb = micro_batch_of(step - 1, stage, stages)[0] if step > 0 else -1
    valid = 0 <= mb < micro_batches or 0 <= prev_mb < micro_batches
    partner = stage - 1 if forward else stage + 1
    return partner if valid and 0 <= partner < stages else None


def schedule_time_s(micro_batches: int, stages: int, t_f_s: float, t_b_s: float) -> float:
    """One batch under TrainSchedule, every paired exchange blocking both partners until both are free."""
    if micro_batches < 1 or stages < 1:
        raise ValueError(f"micro_batches ({micro_batches}) and stages ({stages}) must be >= 1")
    end = [0.0] * stages
    for step in range(2 * (micro_batches + stages - 1)):
        start = [max(end[s], end[p]) if (p := _exchanges(step, s, stages, micro_batches)) is not None else end[s]
                 for s in range(stages)]
        for s in range(stages):
            mb, forward = micro_batch_of(step, s, stages)
            work = (t_f_s if forward else t_b_s) if 0 <= mb < micro_batches else 0.0
            end[s] = start[s] + work
    return max(end)


def one_f_one_b_time_s(micro_batches: int, stages: int, t_f_s: float, t_b_s: float) -> float:
    """1F1B critical path with uniform stages: (m + pp - 1) (t_f + t_b) (Narayanan et al. 2021, sec. 2.2.1)."""
    return (micro_batches + stages - 1) * (t_f_s + t_b_s)
