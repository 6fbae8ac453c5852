"""WhisperForAudioClassification (transformers 5.24 modeling_whisper.py): the Whisper encoder alone
as an encoder over log-mel frames (`FeatureInput`: conv1 Conv1d(num_mel_bins, d, 3) on the 100
frames a second, conv2 Conv1d(d, d, 3, stride 2), both biased, written as linears over their
im2col rows), the frozen sinusoid table of max_source_positions rows (a learned-position table
held with requires_grad false), pre-LN blocks with q / v / out biased and k bias-free, fc1 / fc2,
the final layer_norm; then projector Linear(d, classifier_proj_size) on every frame, mean-pooled,
classifier Linear(classifier_proj_size, num_labels) and, with use_weighted_layer_sum,
layer_weights (encoder_layers + 1). Every other Whisper class is hf_n18encdec.py's."""

from __future__ import annotations

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18encdec import N18ENCDEC_MAPPERS
from modelplan.specs.hf_vision_models import labels, linear

_CLASS = "WhisperForAudioClassification"


def _classifies(c: HFConfig) -> bool:
    names = c.texts("architectures", None)
    return bool(names) and names[0] == _CLASS


def _whisper(c: HFConfig) -> dict:
    """WhisperForAudioClassification (module docstring); any other class: the encoder-decoder mapper."""
    if not _classifies(c):
        return N18ENCDEC_MAPPERS["whisper"](c)
    d, n, mel = c.size("d_model"), c.size("encoder_layers"), c.size("num_mel_bins")
    proj = c.integer("classifier_proj_size", 256)
    head = [linear("projector", d, proj, rows=None), linear("classifier", proj, labels(c))]
    if c.flag("use_weighted_layer_sum", False):
        head.append(dict(name="layer_weights", kind="vector", in_features=n + 1))
    front = [dict(name="conv1", kind="linear", in_features=3 * mel, out_features=d, bias=True, rows=2),
             dict(name="conv2", kind="linear", in_features=3 * d, out_features=d, bias=True)]
    return dict(
        arch="encoder", layers=n, hidden=d, heads=c.divisor("encoder_attention_heads"),
        ffn_hidden=c.size("encoder_ffn_dim"), norm="layernorm", norm_bias=True, norm_eps=1e-5, norm_placement="pre",
        embedding_norm=False, final_norm=True, qkv_bias=False, attn_out_bias=True, mlp_bias=True, gated_mlp=False,
        activation=c.activation("gelu", "activation_function"), position="learned",
        max_positions=c.size("max_source_positions"),
        dropout=c.dropout(0.0, "dropout", "attention_dropout", "activation_dropout"),
        lm_head=False, tied_embeddings=False, vocab=1,
        inputs=dict(modality="features", front=front, frames_per_second=50, qv_bias=True, head=head))


def _whisper_head(fields: dict, c: HFConfig, apply_head, architecture) -> dict:
    """The classifier head is the mapper's; every other class goes through hf.apply_head."""
    return fields if _classifies(c) else apply_head(fields, c, architecture(c))


WHISPER_ENCODER_MAPPERS = {"whisper": _whisper}
WHISPER_ENCODER_HEADS = {"whisper": _whisper_head}
