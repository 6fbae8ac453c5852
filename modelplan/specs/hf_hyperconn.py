"""HF config mappers of decoders with hyper-connections (transformers 5.24; `specs/hyperconn.py`):

- hy_v4 (HYV4ForCausalLM, HYV4Config defaults, tencent/Hy4-preview): DeepSeek-V3.2 blocks (MLA
  with the lightning indexer, a dense first block, sigmoid-routed experts and one shared expert)
  whose attention adds a per-channel output gate (gate_proj Linear(h, heads v_head_dim)) and a
  sink logit per head (HYV4Attention); the indexer only on the blocks indexer_types says 'full'
  (default block 0 and every block i with (i - 1) % 4 == 0), the others reuse its top-k; independent
  hyper-connections of hc_mult streams around both branches and a learned collapse head
  (HYV4HyperConnection, HYV4HyperHead); no MTP modules built (HYV4PreTrainedModel ignores them).
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_deepseek32 import DEEPSEEK32_MAPPERS
from modelplan.specs.hf_deepseek_like import _with

_HY_V4 = dict(vocab_size=120832, hidden_size=2816, intermediate_size=6912, moe_intermediate_size=768,
              num_hidden_layers=34, num_attention_heads=32, max_position_embeddings=262144, rms_norm_eps=1e-5,
              tie_word_embeddings=False, attention_bias=False, n_routed_experts=256, n_shared_experts=1,
              num_experts_per_tok=8, routed_scaling_factor=2.827, norm_topk_prob=True, n_group=1, topk_group=1,
              q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
              index_topk=2048, index_head_dim=128, index_n_heads=16, hc_mult=4)
"""HYV4Config's defaults (transformers 5.24 configuration_hy_v4.py)."""


def _hy_v4(c: HFConfig) -> dict:
    """HYV4ForCausalLM as DeepSeek-V3.2 modules plus the gate, sinks and hyper-connections."""
    c = _with(c, _HY_V4)
    layers = c.size("num_hidden_layers")
    kinds = c.texts("layer_types", None)
    if kinds is not None and set(kinds) - {"indexed_attention"}:
        raise SpecError(f"{c.source}: layer_types: only 'indexed_attention' blocks exist in hy_v4 (got {sorted(set(kinds))})")
    if c.texts("mlp_layer_types", None) is None:  # HYV4Config.__post_init__: one dense block, then sparse
        c = HFConfig({**c.data, "mlp_layer_types": ["dense"] * min(1, layers) + ["sparse"] * max(layers - 1, 0)},
                     c.source, c.path, c.defaults)
    indexers = c.texts("indexer_types", None) or ["full" if i == 0 or (i - 1) % 4 == 0 else "shared"
                                                  for i in range(layers)]
    c.check_names("indexer_types", indexers, ("full", "shared"), layers)
    if indexers[0] != "full":
        raise SpecError(f"{c.source}: indexer_types: block 0 must be 'full' (a 'shared' block reuses an earlier top-k)")
    fields = DEEPSEEK32_MAPPERS["deepseek_v32"](c)
    owners = [i for i, kind in enumerate(indexers) if kind == "full"]
    indexer = {**fields["mla"]["indexer"], "layers": None if len(owners) == layers else owners}
    hc = dict(streams=c.integer("hc_mult", 4), comb=False, head="learned")
    if hc["streams"] < 2:
        raise SpecError(f"{c.source}: hc_mult: {hc['streams']} streams is not a hyper-connection (>= 2)")
    return {**fields, "mla": {**fields["mla"], "indexer": indexer}, "head_gate": "element", "attention_sinks": True,
            "hyper_connections": hc, "mtp_layers": 0}


HYPERCONN_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"hy_v4": _hy_v4}
