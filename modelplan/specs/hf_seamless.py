"""SeamlessM4T(v2)ForTextToText (transformers 5.24 modeling_seamless_m4t.py,
modeling_seamless_m4t_v2.py): the text encoder-decoder of SeamlessM4T alone, NLLB's M2M100 shape
(pre-LN stacks with a final layer_norm each, sinusoidal positions held as buffers, embeddings scaled
by sqrt(hidden_size), `shared` tied to both stacks' embed_tokens and the lm_head), read through the
m2m_100 mapper with hidden_size as d_model. The other SeamlessM4T classes (the Conformer speech
encoder and its adapter, the text-to-unit model, the HiFi-GAN vocoder) are refused in one line."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_seq2seq_more import SEQ2SEQ_MORE_MAPPERS


def _seamless(prefix: str):
    def mapper(c: HFConfig) -> dict:
        """...ForTextToText (module docstring)."""
        names = c.texts("architectures", None)
        name = names[0] if names else f"{prefix}ForTextToText"
        if name != f"{prefix}ForTextToText":
            raise SpecError(f"{c.source}: architectures: '{name}' not modelled (its Conformer speech encoder, "
                            f"text-to-unit model and vocoder); supported: {prefix}ForTextToText")
        data = {**c.data, "d_model": c.divisor("hidden_size"), "model_type": "m2m_100",
                "architectures": ["M2M100ForConditionalGeneration"]}
        return SEQ2SEQ_MORE_MAPPERS["m2m_100"](HFConfig(data, c.source, c.path))
    return mapper


SEAMLESS_MAPPERS = {"seamless_m4t": _seamless("SeamlessM4T"), "seamless_m4t_v2": _seamless("SeamlessM4Tv2")}
"""model_type -> mapper; each reads `architectures` itself (its head is the LM head)."""
