"""Compute-optimal model size and tokens for a FLOP budget (Hoffmann et al. 2022, "Chinchilla").

Training compute C = 6 N D (N parameters, D tokens; Kaplan et al. 2020, Hoffmann et al. sec. 3).
Two ways to split it:
- a fitted loss law L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al. sec. 3.3, eq. 2,
  Approach 3), minimised on C = 6 N D (their eq. 4):
      N_opt = G (C/6)^(beta/(alpha+beta)),  D_opt = G^-1 (C/6)^(alpha/(alpha+beta)),
      G = (alpha A / (beta B))^(1/(alpha+beta)).
  Two fits are shipped: Hoffmann et al.'s published Approach 3 fit and Besiroglu et al.'s 2024
  replication of it (arXiv 2404.10102), whose exponents agree with Hoffmann's Approaches 1 and 2;
- a tokens-per-parameter target r (Chinchilla's ~20 tokens per parameter; larger r over-trains
  a smaller model for cheaper inference): C = 6 r N^2, N = sqrt(C / 6r), D = r N.
Both count every parameter, embeddings included, as Hoffmann et al. do.
"""

from __future__ import annotations

import math
from typing import Literal

from modelplan.count.result import Result
from modelplan.errors import SpecError

LawName = Literal["hoffmann", "besiroglu"]
CHINCHILLA_TOKENS_PER_PARAM = 20.0
"""The rule of thumb Chinchilla's Approaches 1 and 2 give (Hoffmann et al. Table 3: 67B on 1.5T tokens)."""


class LossLaw(Result):
    """L(N, D) = E + A / N^alpha + B / D^beta, in nats per token on the fit's corpus (MassiveText)."""


    name: str
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    source: str

    def loss(self, params: float, tokens: float) -> float:
        """Predicted final loss of N parameters trained on D tokens (Hoffmann et al. eq. 2)."""
        return self.E + self.A / params**self.alpha + self.B / tokens**self.beta

    def optimum(self, flops: float) -> tuple[float, float]:
        """(N_opt, D_opt) minimising the loss on C = 6 N D (Hoffmann et al. eq. 4)."""
        g = (self.alpha * self.A / (self.beta * self.B)) ** (1.0 / (self.alpha + self.beta))
        params = g * (flops / 6.0) ** (self.beta / (self.alpha + self.beta))
        return params, flops / (6.0 * params)


LAWS: dict[str, LossLaw] = {
    "hoffmann": LossLaw(name="hoffmann", E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28,
                        source="Hoffmann et al. 2022 (arXiv 2203.15556) sec. 3.3, Approach 3 parametric fit"),
    "besiroglu": LossLaw(name="besiroglu", E=1.8172, A=482.01, B=2085.43, alpha=0.3478, beta=0.3658,
                         source="Besiroglu et al. 2024 (arXiv 2404.10102), replication of Approach 3"),
}


def rule_optimum(flops: float, tokens_per_param: float) -> tuple[float, float]:
    """(N, D) with D = r N on C = 6 N D: N = sqrt(C / 6r)."""
    if tokens_per_param <= 0:
        raise SpecError(f"tokens_per_param ({tokens_per_param}) must be > 0")
    params = math.sqrt(flops / (6.0 * tokens_per_param))
    return params, tokens_per_param * params


def training_flops(params: float, tokens: float) -> float:
    """C = 6 N D (2 FLOPs per multiply-add, forward + 2x backward)."""
    return 6.0 * params * tokens
