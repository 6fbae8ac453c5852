"""HF config mappers of the RoBERTa family (transformers 5.24): roberta, xlm-roberta, camembert and
data2vec-text build BERT's modules (post-LN encoder, learned positions incl. the padding offset
rows, token types, embedding LayerNorm; their LM head is BERT's MLM head in size: dense, LayerNorm,
tied decoder, vocab bias; their sequence-classification head, dense + out_proj on the first token,
has the size of BERT's pooler + classifier), so they read as `bert`. roberta-prelayernorm and
xlm-roberta-xl are pre-LN: a LayerNorm before attention and before the MLP in every block and one
after the encoder (xlm-roberta-xl has no embedding LayerNorm). Also sarvam_mla, which transformers
builds as DeepSeek-V3 modules, with SarvamMLAConfig's defaults for the keys a config leaves out."""

from __future__ import annotations

from typing import Callable

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.hf_moe import MOE_MAPPERS

_bert = GPT_MAPPERS["bert"]


def _pre_ln(embedding_norm: bool) -> Callable[[HFConfig], dict]:
    """RobertaPreLayerNorm / XLMRobertaXL: BERT's sizes with pre-LN blocks and a final LayerNorm."""
    def mapper(c: HFConfig) -> dict:
        return {**_bert(c), "norm_placement": "pre", "final_norm": True, "embedding_norm": embedding_norm}
    return mapper


_SARVAM_MLA = dict(first_k_dense_replace=1, hidden_size=4096, intermediate_size=16384, n_group=1,
                   n_routed_experts=128, num_attention_heads=64, num_key_value_heads=64, num_hidden_layers=32,
                   num_nextn_predict_layers=0, q_lora_rank=None, topk_group=1, vocab_size=262144)
"""SarvamMLAConfig's defaults where they differ from DeepseekV3Config's (transformers 5.24)."""


def _sarvam_mla(c: HFConfig) -> dict:
    """Sarvam's MLA MoE (built as DeepseekV3ForCausalLM)."""
    return MOE_MAPPERS["deepseek_v3"](HFConfig({**_SARVAM_MLA, **c.data}, c.source, c.path, c.defaults))


ROBERTA_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "roberta": _bert, "xlm-roberta": _bert, "camembert": _bert, "data2vec-text": _bert,
    "roberta-prelayernorm": _pre_ln(True), "xlm-roberta-xl": _pre_ln(False), "sarvam_mla": _sarvam_mla,
}
