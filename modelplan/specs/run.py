"""A whole training run: how many tokens (or steps), and what it costs besides the steps.

Defaults are stated figures, each with its source, for the user to replace with their own:
- MTBF per GPU: the Llama 3 report (Grattafiori et al. 2024, sec. 3.3.4) counts 419 unexpected
  interruptions in a 54-day snapshot of pre-training on 16,384 H100 GPUs, i.e. one per
  16,384 x 54 x 24 / 419 = 50,677 GPU-hours.
- Checkpoint write bandwidth: the same report's Tectonic storage sustains 2 TB/s for those
  16,384 GPUs (sec. 3.3.1), 2e12 / 16,384 = 122 MB/s per GPU, scaled to the job's GPUs.
- PUE 1.1: an assumption for a hyperscale data centre; Patterson et al. 2021 (arXiv 2104.10350)
  find cloud data centres ~1.4-2x more energy-efficient than typical ones.
- Restart 10 minutes per failure (job rescheduling, NCCL start-up, checkpoint load): an
  assumption; with Llama 3's interruption rate it keeps their reported > 90 % effective training time.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from modelplan.specs.base import Spec

LLAMA3_INTERRUPTIONS = 419
LLAMA3_GPUS = 16_384
LLAMA3_DAYS = 54
MTBF_GPU_HOURS = LLAMA3_GPUS * LLAMA3_DAYS * 24 / LLAMA3_INTERRUPTIONS
"""Mean GPU-hours between unexpected job interruptions (Llama 3 report, sec. 3.3.4)."""
CHECKPOINT_WRITE_GBPS_PER_GPU = 2000.0 / LLAMA3_GPUS
"""Sustained storage write share per GPU in GB/s (Llama 3 report, sec. 3.3.1: Tectonic 2 TB/s)."""


class RampUp(Spec):
    """Megatron-LM's --rampup-batch-size <start> <increment> <samples>: the global batch grows from
    `start_batch` by `increment` every samples / ((global - start) / increment) sequences."""

    start_batch: int = Field(gt=0)
    """Global batch (sequences) of the first step."""
    increment: int = Field(gt=0)
    """Sequences added at each ramp stage."""
    samples: int = Field(ge=0)
    """Sequences consumed before the batch reaches the global batch."""


class RunSpec(Spec):
    """What the whole run trains and the figures its time, energy and cost are priced with."""

    tokens: int | None = Field(None, gt=0)
    """Tokens to train on; the run takes as many steps as it needs to reach them."""
    steps: int | None = Field(None, gt=0)
    """Optimizer steps to run (instead of tokens)."""
    rampup: RampUp | None = None
    """Batch-size ramp-up at the start of the run; None: every step at the global batch."""
    price_per_gpu_hour_usd: float | None = Field(None, gt=0)
    """Price of one GPU-hour in US dollars; None: the cluster preset's list price, if any."""
    pue: float = Field(1.1, ge=1.0, le=3.0)
    """Power usage effectiveness: facility energy / IT energy (see the module docstring)."""
    checkpoint_every: int | None = Field(None, gt=0)
    """Steps between checkpoints; None: Young's optimal interval for the job's MTBF."""
    checkpoint_write_gbps: float | None = Field(None, gt=0)
    """Aggregate checkpoint write bandwidth in GB/s; None: 122 MB/s per GPU (Llama 3's storage)."""
    mtbf_gpu_hours: float = Field(MTBF_GPU_HOURS, gt=0)
    """Mean GPU-hours between failures that stop the job (Llama 3 report: 50,677)."""
    restart_minutes: float = Field(10.0, ge=0)
    """Minutes from a failure to training again (reschedule, start-up, checkpoint load)."""

    @model_validator(mode="after")
    def _check(self) -> "RunSpec":
        if (self.tokens is None) == (self.steps is None):
            raise ValueError("give exactly one of tokens and steps")
        return self

    def write_gbps(self, gpus: int) -> float:
        """Checkpoint write bandwidth of a job on `gpus` GPUs, GB/s."""
        if self.checkpoint_write_gbps is not None:
            return self.checkpoint_write_gbps
        return CHECKPOINT_WRITE_GBPS_PER_GPU * gpus
