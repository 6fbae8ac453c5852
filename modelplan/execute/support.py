"""What the numpy executor runs, and the one check `verify` makes before anything else: a model
feature it cannot execute is refused by name (exit 2), never dropped from the executed step.

`EXECUTED` lists the `specs.features` names the executor implements, each with its backward
checked against finite differences and, where transformers has the module, against it in float64
(tests/test_exec_features.py, tests/test_exec_families.py). `TEXT_ONLY` lists what a text-only
training step does not run at all (a vision tower without images), accepted with a note.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.family import family_of
from modelplan.specs.features import architecture_features

EXECUTED: frozenset[str] = frozenset({
    # attention (layers/attention.py, layers/mla.py)
    "qk_norm", "attention_sinks", "attn_logit_softcap", "attention_scale", "qkv_clip", "rotary_fraction",
    "nope_full_attention", "mla", "layer_types=sliding_attention", "layer_types=chunked_attention",
    # norms and scales (residual.py, reference / vocab_parallel)
    "norm_placement=sandwich", "norm_placement=output", "norm_placement=post", "norm_affine=false",
    "embedding_scale", "residual_scale", "logit_scale", "final_logit_softcap",
    # MLP and experts (layers/mlp.py, layers/moe.py)
    "activation=swiglu_clamp", "moe.router=sigmoid", "moe.norm_topk_prob=false", "moe.router_score_correction",
    "moe.routed_scaling", "moe.router_groups", "moe.shared_expert_gate", "moe.expert_bias",
    "moe.weights_on_input",
    # Mamba mixers (layers/mamba.py, layers/mamba2.py), MLP-free and mixer-free (Nemotron-H) blocks
    "layer_types=mamba", "layer_types=mamba2", "mlp=false", "layer_types=mlp",
    # gated DeltaNet (layers/deltanet.py) and Qwen3-Next's gated attention output (layers/attention.py)
    "layer_types=gated_deltanet", "attention_output_gate",
    # multi-token prediction on the last stage (mtp.py)
    "mtp_layers",
})
"""Feature names of specs.features.architecture_features that execute/ implements."""

TEXT_ONLY: frozenset[str] = frozenset({"vision"})
"""Features a text-only step never runs (transformers skips the vision tower without pixel_values);
`scale_down` leaves them out and verify says so in its notes."""


COUNT_ONLY: frozenset[str] = frozenset({"extras.act_params"})
"""Learned scalars the step's comm list and schedule do not depend on (Apertus' xIELU alpha_p /
alpha_n, run as the baseline activation): `scale_down` leaves them out and verify says so."""


def unexecuted_features(spec) -> list[str]:
    """The features of a transformer spec the executor would not run (empty for network specs)."""
    if not family_of(spec).blocks:
        return []
    return [name for name in architecture_features(spec) if name not in EXECUTED | TEXT_ONLY | COUNT_ONLY]


def check_supported(spec) -> None:
    """Refuse a model whose features verify cannot execute, naming every one of them."""
    missing = unexecuted_features(spec)
    if missing:
        raise SpecError(
            f"verify cannot execute {', '.join(missing)} of {spec.name} yet: a feature the numpy "
            "executor does not run is refused rather than dropped"
        )


def text_only_notes(spec) -> list[str]:
    """Verify's notes on what a text-only step leaves out (`TEXT_ONLY`) and on `COUNT_ONLY`'s."""
    if not family_of(spec).blocks:
        return []
    notes = [f"{name}: left out of the scaled-down model (its activation runs as the baseline one)"
             for name in architecture_features(spec) if name in COUNT_ONLY]
    if spec.vision is None:
        return notes
    return notes + ["text-only step: the vision tower and projector are not run (no images; transformers "
                    "skips them without pixel_values) and are left out of the scaled-down model"]
