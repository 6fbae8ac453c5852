"""Property tests: random valid TransformerSpecs never crash the calculator and its breakdowns add up."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from modelplan.count.flops import count_flops
from modelplan.count.memory import activation_bytes_per_layer, count_memory
from modelplan.count.params import count_params
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


@st.composite
def moe_specs(draw, layers: int):
    num_experts = draw(st.integers(1, 8))
    shared = draw(st.integers(0, 2))
    return dict(
        num_experts=num_experts,
        top_k=draw(st.integers(1, num_experts)),
        expert_ffn_hidden=draw(st.integers(1, 32)),
        shared_experts=shared,
        shared_expert_ffn_hidden=draw(st.none() | st.integers(1, 32)),
        shared_expert_gate=shared > 0 and draw(st.booleans()),
        layer_freq=draw(st.integers(1, 3)),
        first_dense_layers=draw(st.integers(0, layers)),
        router_bias=draw(st.booleans()),
    )


@st.composite
def transformer_specs(draw):
    heads = draw(st.integers(1, 8))
    kv_heads = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    head_dim = draw(st.none() | st.integers(1, 16))
    hidden = heads * draw(st.integers(1, 8)) if head_dim is None else draw(st.integers(1, 64))
    layers = draw(st.integers(1, 4))
    lm_head = draw(st.booleans())
    return TransformerSpec(
        arch=draw(st.sampled_from(["decoder", "encoder"])),
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        ffn_hidden=draw(st.integers(1, 64)), vocab=draw(st.integers(1, 100)),
        embedding_dim=draw(st.none() | st.integers(1, 16)),
        max_positions=draw(st.integers(1, 64)),
        position=draw(st.sampled_from(["learned", "rotary", "alibi", "none"])),
        norm=draw(st.sampled_from(["layernorm", "rmsnorm"])), norm_bias=draw(st.booleans()),
        qkv_bias=draw(st.booleans()), attn_out_bias=draw(st.booleans()),
        mlp_bias=draw(st.booleans()), gated_mlp=draw(st.booleans()), qk_norm=draw(st.booleans()),
        tied_embeddings=draw(st.booleans()), lm_head=lm_head,
        lm_head_bias=lm_head and draw(st.booleans()),
        mlm_transform=lm_head and draw(st.booleans()),
        parallel_block=draw(st.booleans()), norms_per_layer=draw(st.none() | st.integers(1, 2)),
        final_norm=draw(st.booleans()), embedding_norm=draw(st.booleans()),
        type_vocab=draw(st.integers(0, 3)), pooler=draw(st.booleans()),
        dropout=draw(st.booleans()),
        moe=draw(st.none() | moe_specs(layers)),
    )


@st.composite
def cases(draw):
    spec = draw(transformer_specs())
    limit = spec.max_positions if spec.position == "learned" else 64
    training = TrainingSpec(
        global_batch=draw(st.integers(1, 4)), seq_len=draw(st.integers(1, limit)),
        precision=draw(st.sampled_from(["fp32", "bf16", "fp16", "fp8"])),
        optimizer=draw(st.sampled_from(["sgd", "momentum", "adam", "adamw"])),
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
    )
    micro_batch = draw(st.integers(1, training.global_batch))
    return spec, training, micro_batch


def assert_tree(breakdown: dict[str, int]) -> None:
    """Every parent equals the sum of its direct children; no value is negative."""
    for key, value in breakdown.items():
        assert value >= 0, key
        depth = key.count("/") + 1
        kids = [v for k, v in breakdown.items() if k.startswith(key + "/") and k.count("/") == depth]
        if kids:
            assert value == sum(kids), key


@settings(max_examples=150, deadline=None)
@given(cases())
def test_calculator_never_crashes_and_breakdowns_add_up(case):
    """count_params / count_flops / count_memory succeed; totals are sums of top-level groups."""
    spec, training, micro_batch = case
    params = count_params(spec)
    flops = count_flops(spec, training)
    memory = count_memory(spec, training, micro_batch)
    top = ("embedding", "layers", "final_norm", "head")
    assert_tree(params.breakdown)
    assert_tree(flops.breakdown)
    assert params.total == sum(params.breakdown[k] for k in top)
    assert flops.forward == sum(flops.breakdown[k] for k in top)
    assert sum(params.per_layer) == params.breakdown["layers"]
    assert 0 < params.active <= params.total
    assert flops.model == 3 * flops.forward <= flops.hardware
    assert len(memory.activations_per_layer) == spec.layers
    assert memory.activations >= sum(memory.activations_per_layer) > 0


@settings(max_examples=100, deadline=None)
@given(cases(), st.integers(1, 8), st.booleans())
def test_tensor_parallel_never_increases_activations(case, tp, sequence_parallel):
    """Splitting over tp ranks (with or without SP) never needs more bytes per GPU than tp = 1."""
    spec, training, micro_batch = case
    args = (spec, micro_batch, training.seq_len, training.dtype_bytes)
    for recompute in ("none", "selective", "full"):
        single = activation_bytes_per_layer(*args, recompute=recompute)
        split = activation_bytes_per_layer(*args, tp=tp, sequence_parallel=sequence_parallel, recompute=recompute)
        assert split <= single
