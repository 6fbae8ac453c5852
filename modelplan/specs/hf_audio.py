"""HF config mappers of the wav2vec 2.0 speech encoders: wav2vec2, HuBERT, UniSpeech,
UniSpeech-SAT, data2vec-audio and WavLM (`specs.encoder_inputs.AudioConvInput` in front of the block
stack; transformers 5.24 modeling_wav2vec2.py, modeling_hubert.py, modeling_unispeech.py,
modeling_unispeech_sat.py, modeling_data2vec_audio.py, modeling_wavlm.py).

The blocks are BERT's post-LN ones behind the encoder's layer_norm (do_stable_layer_norm false)
or pre-LN ones with a final layer_norm (true); attention and feed-forward carry biases; no
position table (the positional conv is part of the input). A sequence is one clip; its tokens
are the feature encoder's frames (49 a second at 16 kHz with the default convs).
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_vision_models import architecture, labels, linear, with_defaults

Mapper = Callable[[HFConfig], dict]

_CONVS = {"conv_dim": [512] * 7, "conv_stride": [5, 2, 2, 2, 2, 2, 2], "conv_kernel": [10, 3, 3, 3, 3, 2, 2]}
_DEFAULTS = {kind: {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                    "vocab_size": 32, "classifier_proj_size": 256, **_CONVS}
             for kind in ("wav2vec2", "hubert", "unispeech", "unispeech-sat", "data2vec-audio", "wavlm")}
"""Wav2Vec2Config / HubertConfig / UniSpeech(Sat)Config / Data2VecAudioConfig size defaults
(transformers 5.24 AutoConfig.for_model)."""

HEADS = {
    "wav2vec2": ("Wav2Vec2Model", "Wav2Vec2ForCTC", "Wav2Vec2ForSequenceClassification", "Wav2Vec2ForPreTraining"),
    "hubert": ("HubertModel", "HubertForCTC", "HubertForSequenceClassification"),
    "unispeech": ("UniSpeechModel", "UniSpeechForCTC", "UniSpeechForSequenceClassification"),
    "unispeech-sat": ("UniSpeechSatModel", "UniSpeechSatForCTC", "UniSpeechSatForSequenceClassification"),
    "data2vec-audio": ("Data2VecAudioModel", "Data2VecAudioForCTC", "Data2VecAudioForSequenceClassification"),
    "wavlm": ("WavLMModel", "WavLMForCTC", "WavLMForSequenceClassification"),
}
"""model_type -> the classes whose head is modelled; the first is the base model."""


def _head(c: HFConfig, name: str, h: int) -> tuple[dict, list[dict]]:
    """(spec head fields, head layers) of class `name`: ...ForCTC's lm_head Linear(h, vocab_size)
    on every frame; ...ForSequenceClassification's projector Linear(h, classifier_proj_size) on
    every frame, mean-pooled, then classifier Linear(classifier_proj_size, num_labels), and
    layer_weights (num_hidden_layers + 1) with use_weighted_layer_sum; Wav2Vec2ForPreTraining's
    Gumbel quantizer (weight_proj Linear(conv_dim[-1], G V) per frame, codevectors G V x
    codevector_dim / G) and project_hid Linear(h, proj_codevector_dim), project_q
    Linear(codevector_dim, proj_codevector_dim), on every frame."""
    none = dict(lm_head=False, tied_embeddings=False, vocab=1)  # no token table (inputs), no vocabulary head
    if name.endswith("ForCTC"):
        return dict(lm_head=True, lm_head_bias=True, tied_embeddings=False, vocab=c.size("vocab_size")), []
    if name.endswith("ForSequenceClassification"):
        proj = c.size("classifier_proj_size")
        layers = [linear("projector", h, proj, rows=None), linear("classifier", proj, labels(c))]
        if c.flag("use_weighted_layer_sum", False):
            layers.append(dict(name="layer_weights", kind="vector", in_features=c.size("num_hidden_layers") + 1))
        return none, layers
    if name.endswith("ForPreTraining"):
        groups, per_group = c.integer("num_codevector_groups", 2), c.integer("num_codevectors_per_group", 320)
        dim, out = c.integer("codevector_dim", 256), c.integer("proj_codevector_dim", 256)
        if dim % groups:
            raise SpecError(f"{c.source}: codevector_dim: {dim} must divide by num_codevector_groups {groups}")
        features = c.ints("conv_dim")[-1]
        return none, [linear("quantizer/weight_proj", features, groups * per_group, rows=None),
                      dict(name="quantizer/codevectors", kind="vector", in_features=groups * per_group * (dim // groups)),
                      linear("project_hid", h, out, rows=None), linear("project_q", dim, out, rows=None)]
    return none, []


def _relative(c: HFConfig, kind: str) -> dict:
    """WavLM: the bucketed relative position bias of WavLMAttention.compute_bias (num_buckets
    buckets, log-spaced up to max_bucket_distance, rel_attn_embed in the first block only)."""
    if kind != "wavlm":
        return dict(position="none")
    return dict(position="relative", relative_buckets=c.integer("num_buckets", 320),
                relative_max_distance=c.integer("max_bucket_distance", 800))


def _speech(kind: str) -> Mapper:
    def mapper(c: HFConfig) -> dict:
        """wav2vec2 / HuBERT / UniSpeech(-SAT) / data2vec-audio / WavLM: feature convs, feature
        projection, positional conv(s), post-LN (or stable pre-LN) blocks, the head
        `architectures` names (HEADS)."""
        name = architecture(c, kind, HEADS)
        c = with_defaults(c, kind, _DEFAULTS)
        if c.flag("add_adapter", False):
            raise SpecError(f"{c.source}: add_adapter: true is not modelled (Wav2Vec2Adapter's strided convs)")
        if c.flag("conv_pos_batch_norm", False):
            raise SpecError(f"{c.source}: conv_pos_batch_norm: true is not modelled (a BatchNorm before an "
                            f"unnormalised positional conv)")
        data2vec = kind == "data2vec-audio"  # LayerNorm after every feature conv, plain positional convs
        norm = "layer" if data2vec else c.text("feat_extract_norm", "group")
        if norm not in ("group", "layer"):
            raise SpecError(f"{c.source}: feat_extract_norm: unsupported '{norm}' (group, layer)")
        h, stable = c.size("hidden_size"), not data2vec and c.flag("do_stable_layer_norm", False)
        # masked_spec_embed: built when mask_time_prob or mask_feature_prob > 0 (UniSpeech-SAT: always)
        masked = (kind == "unispeech-sat" or (c.number("mask_time_prob", 0.05) or 0) > 0
                  or (c.number("mask_feature_prob", 0.0) or 0) > 0)
        head, layers = _head(c, name, h)
        inputs = dict(modality="audio", conv_dim=c.ints("conv_dim"), conv_kernel=c.ints("conv_kernel"),
                      conv_stride=c.ints("conv_stride"), conv_bias=c.flag("conv_bias", False), conv_norm=norm,
                      projection_norm=c.flag("feat_proj_layer_norm", True) if kind == "hubert" else True,
                      position_kernel=c.integer("conv_pos_kernel_size", 19) if data2vec
                      else c.integer("num_conv_pos_embeddings", 128),
                      position_layers=c.integer("num_conv_pos_embeddings", 5) if data2vec else 1,
                      position_weight_norm=not data2vec, gated_relative_bias=kind == "wavlm",
                      position_groups=c.divisor("num_conv_pos_embedding_groups", 16), masked_embedding=masked,
                      head=layers)
        if h % inputs["position_groups"]:
            raise SpecError(f"{c.source}: num_conv_pos_embedding_groups: {inputs['position_groups']} must divide "
                            f"hidden_size {h}")
        return dict(
            arch="encoder", layers=c.size("num_hidden_layers"), hidden=h, heads=c.divisor("num_attention_heads"),
            ffn_hidden=c.size("intermediate_size"), norm="layernorm", norm_bias=True,
            norm_eps=c.number("layer_norm_eps", 1e-5), norm_placement="pre" if stable else "post",
            embedding_norm=not stable, final_norm=stable, qkv_bias=True, attn_out_bias=True, mlp_bias=True,
            gated_mlp=False, activation=c.activation("gelu", "hidden_act"),
            dropout=c.dropout(0.1, "hidden_dropout", "attention_dropout", "activation_dropout"),
            inputs=inputs, **head, **_relative(c, kind))

    return mapper


AUDIO_MAPPERS: dict[str, Mapper] = {kind: _speech(kind) for kind in HEADS}
