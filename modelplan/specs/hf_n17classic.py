"""HF config mappers of BERT-like encoders whose transformers 5.24 modules have BERT's parameter
shapes: roberta, xlm-roberta, camembert, data2vec-text (RobertaEmbeddings' padding_idx and
position offset change no count: max_position_embeddings rows, as in BertEmbeddings), and the
pre-LN variants roberta-prelayernorm, xlm-roberta-xl, megatron-bert (final encoder LayerNorm)."""

from __future__ import annotations

from typing import Callable

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_STYLE


def _roberta(c: HFConfig) -> dict:
    """RobertaModel: BertModel's post-LN blocks, learned positions + token types, pooler."""
    return dict(
        arch="encoder", layers=c.size("num_hidden_layers"), hidden=c.size("hidden_size"),
        heads=c.size("num_attention_heads"), ffn_hidden=c.size("intermediate_size"),
        vocab=c.size("vocab_size"), max_positions=c.integer("max_position_embeddings", 512),
        type_vocab=c.integer("type_vocab_size", 2), position="learned", **GPT_STYLE,
        norm_placement="post", norm_eps=c.number("layer_norm_eps", 1e-12),
        activation=c.activation("gelu", "hidden_act"), embedding_norm=True, final_norm=False,
        pooler=True, lm_head=False,
        dropout=c.dropout(0.1, "hidden_dropout_prob", "attention_probs_dropout_prob"),
    )


def _pre_ln(embedding_norm: bool) -> Callable[[HFConfig], dict]:
    """Pre-LN BERT-likes (RobertaPreLayerNorm / XLMRobertaXL / MegatronBert): a LayerNorm before
    attention and MLP in each block and one after the last block."""
    def mapper(c: HFConfig) -> dict:
        return {**_roberta(c), "norm_placement": "pre", "final_norm": True, "embedding_norm": embedding_norm}
    return mapper


CLASSIC_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "roberta": _roberta, "xlm-roberta": _roberta, "camembert": _roberta, "data2vec-text": _roberta,
    "roberta-prelayernorm": _pre_ln(True), "xlm-roberta-xl": _pre_ln(False), "megatron-bert": _pre_ln(False),
}
