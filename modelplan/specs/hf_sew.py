"""HF config mappers of SEW and SEW-D (transformers 5.24 modeling_sew.py SEWModel / SEWForCTC /
SEWForSequenceClassification, modeling_sew_d.py): wav2vec2's feature convs (13 by default), a
LayerNorm over conv_dim[-1] and, only when conv_dim[-1] != hidden_size, Linear(conv_dim[-1], h);
the squeezed sequence (`AudioConvInput.squeeze`): the weight-normed positional Conv1d strides by
squeeze_factor and is added to the AvgPool1d(squeeze_factor)-pooled frames, the encoder's
LayerNorm, the blocks on the squeezed tokens, SEWUpsampling Linear(h, h squeeze_factor) back to
the frames; the head on every frame (the CTC lm_head Linear(h, vocab_size) as a head layer, the
classifier's projector) or pooled.

- sew: wav2vec2's post-LN blocks (biased attention and fc1 / fc2);
- sew-d: DeBERTa-v2's blocks (disentangled attention, `specs/relative_attention.py`, with the
  encoder's relative embedding table and its LayerNorm), read through the deberta-v2 mapper.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_audio import AUDIO_MAPPERS
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_vision_models import linear

_SEW = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
        "squeeze_factor": 2, "vocab_size": 32, "classifier_proj_size": 256,
        "conv_dim": [64, 128, 128, 128, 128, 256, 256, 256, 256, 512, 512, 512, 512],
        "conv_stride": [5, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1], "conv_kernel": [10, 3, 1, 3, 1, 3, 1, 3, 1, 2, 1, 2, 1]}
"""SEWConfig / SEWDConfig size defaults (transformers 5.24)."""
_NAMES = {"Model": "Wav2Vec2Model", "ForCTC": "Wav2Vec2ForCTC",
          "ForSequenceClassification": "Wav2Vec2ForSequenceClassification"}
"""Head suffix -> the wav2vec2 class of the same head (hf_audio.py)."""


_SEW_D = {"max_position_embeddings": 512, "position_buckets": 256, "share_att_key": True, "relative_attention": True,
          "pos_att_type": ["p2c", "c2p"], "norm_rel_ebd": "layer_norm", "layer_norm_eps": 1e-7,
          "hidden_act": "gelu_python", "position_biased_input": False}
"""SEWDConfig's DeBERTa-v2 defaults (transformers 5.24)."""


def _sew(c: HFConfig, prefix: str = "SEW") -> dict:
    """SEW{Model, ForCTC, ForSequenceClassification} (module docstring)."""
    names = c.texts("architectures", None)
    name = names[0] if names else f"{prefix}Model"
    suffix = name.removeprefix(prefix)
    if not name.startswith(prefix) or suffix not in _NAMES:
        raise SpecError(f"{c.source}: architectures: '{name}' not modelled (supported: "
                        f"{', '.join(prefix + s for s in _NAMES)})")
    data = {**_SEW, **{k: v for k, v in c.data.items() if v is not None}}
    squeeze = HFConfig(data, c.source, c.path).divisor("squeeze_factor")
    data.update(model_type="wav2vec2", architectures=[_NAMES[suffix]], do_stable_layer_norm=False)
    fields = AUDIO_MAPPERS["wav2vec2"](HFConfig(data, c.source, c.path))
    h, inputs = fields["hidden"], dict(fields["inputs"])
    inputs.update(squeeze=squeeze, upsample=True, projection=inputs["conv_dim"][-1] != h)
    if suffix == "ForCTC":  # lm_head on every upsampled frame: a head layer, not the token-table head
        inputs["head"] = [linear("lm_head", h, fields["vocab"], rows=None)] + list(inputs["head"])
        fields.update(lm_head=False, lm_head_bias=False, vocab=1)
    return {**fields, "inputs": inputs}


def _sew_d(c: HFConfig) -> dict:
    """SEWD{Model, ForCTC, ForSequenceClassification}: SEW's input and head around DeBERTa-v2's
    blocks and disentangled attention (the deberta-v2 mapper's extras); no LayerNorm before the
    blocks (SEWDEncoder has none)."""
    from modelplan.specs.hf_encoders import ENCODER_MAPPERS

    fields = _sew(c, "SEWD")
    data = {**_SEW, **_SEW_D, **{k: v for k, v in c.data.items() if v is not None}, "type_vocab_size": 0}
    if data.get("conv_kernel_size", 0):
        raise SpecError(f"{c.source}: conv_kernel_size: {data['conv_kernel_size']} is not modelled (SEW-D's "
                        f"ConvLayer beside the first block)")
    if not data["relative_attention"] and "layer_norm" in str(data["norm_rel_ebd"]).lower():
        raise SpecError(f"{c.source}: relative_attention: false with norm_rel_ebd 'layer_norm' (an idle LayerNorm "
                        f"without rel_embeddings) is not modelled")
    deberta = ENCODER_MAPPERS["deberta-v2"](HFConfig({**data, "model_type": "deberta-v2"}, c.source, c.path))
    return {**fields, "embedding_norm": False, "norm_eps": deberta["norm_eps"], "activation": deberta["activation"],
            **({"extras": deberta["extras"]} if "extras" in deberta else {})}


SEW_MAPPERS = {"sew": _sew, "sew-d": _sew_d}
"""model_type -> mapper; each reads `architectures` itself (hf_speech.SPEECH_HEADS)."""
