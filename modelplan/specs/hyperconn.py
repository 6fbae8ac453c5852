"""Sub-spec of hyper-connections: a residual stream widened to `streams` copies that every block
mixes (`TransformerSpec.hyper_connections`).

- Manifold-constrained hyper-connections (mHC; Xie et al. 2026, DeepSeek-V4 paper sec. 2.2;
  transformers 5.24 `DeepseekV4HyperConnection`, reused by GLM-5-Next): before the attention and
  before the MLP a module reads the n streams (flattened, weight-free RMS-normed), projects them
  with fn ((2 + n) n, n h) to the collapse weights `pre` (n), the expansion weights `post` (n) and
  the n x n residual mix `comb` (Sinkhorn-projected to a doubly-stochastic matrix); the branch
  reads sum_j pre_j x_j, and the streams become post_i f(.) + sum_j comb_ji x_j. base
  ((2 + n) n) and scale (3) are its other parameters.
- Independent hyper-connections (`comb` false; transformers `HYV4HyperConnection`): fn (2 n, n h),
  base (2 n), scale (2); no mix, the residual is added stream by stream.

The embeddings are copied into the n streams; before the final norm a head collapses them:
`DeepseekV4HyperHead` (hc_fn (n, n h), hc_base (n), hc_scale (1)) or a plain mean (GLM-5-Next).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from modelplan.specs.base import Spec


class HyperConnSpec(Spec):
    """Hyper-connections around both branches of every block."""

    streams: int = Field(4, ge=2)
    """n: copies of the residual stream (HF hc_mult)."""
    comb: bool = True
    """The n x n residual mix of mHC (DeepSeek-V4, GLM-5-Next); false: HY-V4's independent
    hyper-connections (pre and post weights only)."""
    lowrank: int | None = Field(None, gt=0)
    """r: Qwen4-Exp's gated residual (Qwen4ExpTextGatedResidual) instead: a grouped RMSNorm over the
    streams (n h weights, replacing the block's norms), a rank-r sigmoid mixer down (n h -> r) and up
    (r -> n h) collapsing them and block_inject_weight (n h -> n) expanding the branch output; the
    head the same module without the injection. None: the fn projection above."""
    head: Literal["learned", "mean"] = "learned"
    """The final collapse of the streams: learned (DeepseekV4HyperHead / HYV4HyperHead weights) or
    a parameter-free mean (Glm5NextTextHyperHead)."""

    @property
    def mixes(self) -> int:
        """Outputs of one module's fn projection: pre and post (n each), plus comb (n^2) with mHC."""
        n = self.streams
        return (2 + n) * n if self.comb else 2 * n
