"""HF config mapper of LongCat-Flash (longcat_flash; transformers 5.24 modeling_longcat_flash.py,
LongCat-Flash Technical Report, arXiv 2509.01322 sec. 2.1). Each of its num_layers layers holds two
MLA attention sublayers and two dense SwiGLU MLPs (ffn_hidden_size), four RMSNorms, and one
shortcut-connected MoE that reads the first MLP's input and joins the residual at the end of the
layer. It is read as 2 num_layers spec blocks: the even block's MLP is the MoE with the first
dense MLP as its one shared expert (same input, same counts; `moe.shortcut` marks the later
join), the odd block keeps the second dense MLP. The router scores n_routed_experts +
zero_expert_num experts (softmax, a selection-only correction buffer, routed_scaling_factor, no
renormalisation); zero experts are identities (`moe.zero_experts`). transformers allocates the
experts' gate_up_proj for the zero experts too (never read): counted as `mlp/zero_expert_padding`
so the total equals the module (741,053,585,408 at the class defaults; the report's 560B is the
total without it)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import llama


def _longcat_flash(c: HFConfig) -> dict:
    """LongcatFlashForCausalLM (LongcatFlashConfig defaults: meituan-longcat/LongCat-Flash-Chat)."""
    c = c.renamed({"num_local_experts": "n_routed_experts", "num_experts_per_tok": "moe_topk",
                   "intermediate_size": "ffn_hidden_size", "moe_intermediate_size": "expert_ffn_hidden_size"})
    layers = c.integer("num_layers", None) or c.size("num_hidden_layers") // 2
    nope, rope = c.integer("qk_nope_head_dim", 128), c.integer("qk_rope_head_dim", 64)
    qk = c.integer("qk_head_dim", None, nullable=True)
    if qk is not None and qk != nope + rope:
        raise SpecError(f"{c.source}: qk_head_dim: {qk} must equal qk_nope_head_dim + qk_rope_head_dim ({nope + rope})")
    mla = dict(kv_lora_rank=c.integer("kv_lora_rank", 512), q_lora_rank=c.integer("q_lora_rank", 1536),
               qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=c.integer("v_head_dim", 128))
    zero = c.integer("zero_expert_num", 256, nullable=True) or 0
    routed = c.integer("n_routed_experts", 512)
    if routed < 1:
        raise SpecError(f"{c.source}: n_routed_experts: must be >= 1, got {routed}")
    moe = dict(num_experts=routed, top_k=c.integer("moe_topk", 12), expert_ffn_hidden=c.integer("expert_ffn_hidden_size", 2048),
               shared_experts=1, shared_expert_ffn_hidden=c.integer("ffn_hidden_size", 12288),
               router="softmax", router_score_correction=True, norm_topk_prob=False, router_bias=c.flag("router_bias", False),
               routed_scaling=c.number("routed_scaling_factor", 6.0, positive=True), expert_bias=False,
               zero_experts=zero, zero_expert_padding=zero > 0, shortcut=True,
               layers=list(range(0, 2 * layers, 2)))  # the even blocks
    data = {**c.data, "num_hidden_layers": 2 * layers, "intermediate_size": c.integer("ffn_hidden_size", 12288)}
    c = HFConfig(data, c.source, c.path, c.defaults)
    bias = c.flag("attention_bias", False)
    return llama(c, kv_heads=None, head_dim=None, mla=mla, moe=moe, qkv_bias=bias, attn_out_bias=bias,
                   vocab=c.integer("vocab_size", 131072), heads=c.integer("num_attention_heads", 64),
                   hidden=c.integer("hidden_size", 6144), max_positions=c.integer("max_position_embeddings", 131072),
                   norm_eps=c.number("rms_norm_eps", 1e-5))


LONGCAT_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"longcat_flash": _longcat_flash}
