"""Product-key expert memory beside a block's MLP (`TransformerSpec.product_key_experts`): Doge's
cross-domain MoE (transformers 5.24 DogeCDMoE; product keys after Lample et al. 2019, "Large
Memory Layers with Product Keys", arXiv 1907.05242). A bias-free router_gate Linear(h, 2 sqrt(E))
scores two halves of keys; the best top_k of the sqrt(E) x sqrt(E) sums pick experts, each one
row of down_embed and of up_embed (Embedding(E, h) each): act(x . down_e) * w_e * up_e summed."""

from __future__ import annotations

from math import isqrt

from pydantic import Field, model_validator

from modelplan.specs.base import Spec


class ProductKeySpec(Spec):
    """The expert memory's sizes."""

    num_experts: int = Field(gt=0)
    """E: experts, one down and one up vector of width h each (HF num_experts)."""
    top_k: int = Field(gt=0)
    """Experts a token reads (HF num_experts_per_tok)."""

    @model_validator(mode="after")
    def _check(self) -> "ProductKeySpec":
        if self.top_k > self.num_keys ** 2:  # DogeCDMoE picks top_k of num_keys^2 key sums
            raise ValueError(f"product_key_experts.top_k ({self.top_k}) exceeds floor(sqrt(num_experts))^2 "
                             f"({self.num_keys ** 2})")
        return self

    @property
    def num_keys(self) -> int:
        """Keys of each half: floor(sqrt(E)) (DogeCDMoE.num_keys)."""
        return isqrt(self.num_experts)
