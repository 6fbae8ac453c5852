"""HF config mappers of the Conformer speech encoders (`specs/conformer.py` blocks on the block stack):

- wav2vec2-conformer (transformers 5.24 modeling_wav2vec2_conformer.py): wav2vec2's feature convs,
  projection and positional conv (`AudioConvInput`; Wav2Vec2ConformerEncoder builds pos_conv_embed
  and never calls it: its parameters count, its FLOPs are priced as wav2vec2's), pre-LN Conformer
  blocks (biased q/k/v/out and feed-forwards, a bias-free conv module with BatchNorm), the
  encoder's final LayerNorm; relative (Transformer-XL), rotary or no positions; wav2vec2's heads;
- wav2vec2-bert (modeling_wav2vec2_bert.py): filter-bank features (`FeatureInput`: LayerNorm and
  Linear(feature_projection_input_dim, h)), the same blocks with a LayerNorm after the depthwise
  conv and, by default, a learned distance table per block (relative_key); no final norm.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_audio import AUDIO_MAPPERS, _head
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_vision_models import with_defaults

_NAMES = {"Model": "Wav2Vec2Model", "ForCTC": "Wav2Vec2ForCTC",
          "ForSequenceClassification": "Wav2Vec2ForSequenceClassification", "ForPreTraining": "Wav2Vec2ForPreTraining"}
"""Head suffix -> the wav2vec2 class of the same head (hf_audio.py)."""

_BERT_DEFAULTS = {"wav2vec2-bert": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                                    "intermediate_size": 4096, "feature_projection_input_dim": 160,
                                    "classifier_proj_size": 768}}
"""Wav2Vec2BertConfig size defaults (transformers 5.24)."""


def _head_class(c: HFConfig, prefix: str, suffixes: tuple[str, ...]) -> str:
    """architectures[0] (else the base model) as one of prefix + suffixes; others refused in one line."""
    names = c.texts("architectures", None)
    name = names[0] if names else f"{prefix}Model"
    if name not in [prefix + s for s in suffixes]:
        raise SpecError(f"{c.source}: architectures: '{name}' not modelled (supported: "
                        f"{', '.join(prefix + s for s in suffixes)})")
    if name.endswith("ForCTC") and c.data.get("vocab_size") is None:
        raise SpecError(f"{c.source}: vocab_size: missing ({name}'s lm_head needs it; transformers refuses too)")
    return name


def _positions(c: HFConfig, default: str) -> dict:
    """position / conformer.relative fields of position_embeddings_type."""
    kind = c.data.get("position_embeddings_type", default)
    if kind not in ("relative", "rotary", "relative_key", None):
        raise SpecError(f"{c.source}: position_embeddings_type: unsupported {kind!r} (relative, rotary, relative_key, null)")
    relative = {"relative": "xl", "relative_key": "key"}.get(kind, "none")
    rows = c.integer("left_max_position_embeddings", 64) + c.integer("right_max_position_embeddings", 8) + 1 \
        if kind == "relative_key" else 0
    return dict(position="rotary" if kind == "rotary" else "none", relative=relative, relative_rows=rows)


def _conformer(c: HFConfig, positions: dict, **conv) -> dict:
    """extras.conformer of a Wav2Vec2-Conformer / -BERT block (bias-free conv module)."""
    kernel = c.integer("conv_depthwise_kernel_size", 31)
    if kernel % 2 == 0:
        raise SpecError(f"{c.source}: conv_depthwise_kernel_size: {kernel} must be odd ('SAME' padding)")
    return {"conformer": {"conv": {"kernel": kernel, **conv}, "relative": positions["relative"],
                          "relative_rows": positions["relative_rows"]}}


def _wav2vec2_conformer(c: HFConfig) -> dict:
    """Wav2Vec2Conformer{Model, ForCTC, ForSequenceClassification, ForPreTraining} (module docstring):
    read as the wav2vec2 class of the same head with stable (pre-LN) blocks, plus the Conformer parts."""
    name = _head_class(c, "Wav2Vec2Conformer", tuple(_NAMES))
    data = {k: v for k, v in c.data.items() if not (k == "vocab_size" and v is None)}
    data.update(model_type="wav2vec2", architectures=[_NAMES[name.removeprefix("Wav2Vec2Conformer")]],
                do_stable_layer_norm=True)
    fields = AUDIO_MAPPERS["wav2vec2"](HFConfig(data, c.source, c.path))
    positions = _positions(c, "relative")
    return {**fields, "position": positions["position"], "extras": _conformer(c, positions)}


def _wav2vec2_bert(c: HFConfig) -> dict:
    """Wav2Vec2Bert{Model, ForCTC, ForSequenceClassification} (module docstring)."""
    name = _head_class(c, "Wav2Vec2Bert", ("Model", "ForCTC", "ForSequenceClassification"))
    c = with_defaults(c, "wav2vec2-bert", _BERT_DEFAULTS)
    for key, why in (("add_adapter", "Wav2Vec2BertAdapter's strided conv blocks"),
                     ("use_intermediate_ffn_before_adapter", "the intermediate feed-forward before the adapter")):
        if c.flag(key, False):
            raise SpecError(f"{c.source}: {key}: true is not modelled ({why})")
    h, n_in = c.size("hidden_size"), c.size("feature_projection_input_dim")
    head, layers = _head(c, name, h)
    masked = (c.number("mask_time_prob", 0.05) or 0) > 0 or (c.number("mask_feature_prob", 0.0) or 0) > 0
    # the feature extractor stacks 2 frames of 80 mel bins every 20 ms (Wav2Vec2BertFeatureExtractor stride 2)
    inputs = dict(modality="features", frames_per_second=50, masked_embedding=masked, head=layers, front=[
        dict(name="projection/norm", kind="layernorm", in_features=n_in, bias=True),
        dict(name="projection/linear", kind="linear", in_features=n_in, out_features=h, bias=True)])
    positions = _positions(c, "relative_key")
    return dict(
        arch="encoder", layers=c.size("num_hidden_layers"), hidden=h, heads=c.divisor("num_attention_heads"),
        ffn_hidden=c.size("intermediate_size"), norm="layernorm", norm_bias=True,
        norm_eps=c.number("layer_norm_eps", 1e-5), norm_placement="pre", embedding_norm=False, final_norm=False,
        qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=False,
        activation=c.activation("swish", "hidden_act"),
        dropout=c.dropout(0.0, "hidden_dropout", "attention_dropout", "activation_dropout"),
        inputs=inputs, position=positions["position"], extras=_conformer(c, positions, norm="layer"), **head)


CONFORMER_MAPPERS = {"wav2vec2-conformer": _wav2vec2_conformer, "wav2vec2-bert": _wav2vec2_bert}
"""model_type -> mapper; each reads `architectures` itself (hf_speech.SPEECH_HEADS)."""
