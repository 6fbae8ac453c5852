"""The types of modelplan/specs/hf_n18small.py and the block-stack options they use
(modelplan/specs/extras.py): total parameters equal sum(p.numel()) of transformers 5.24's module
built from a tiny config on CPU (the independent source) for every head the loader reads, and at
the config class defaults on the meta device; trainable parameters equal those with
requires_grad; training FLOPs equal FlopCounterMode's count of one forward + backward; `count` and
`plan --gpus 8` run and `verify` refuses the new options by name in one line."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan_verify, assert_one_line_error, assert_total_on_cpu, class_defaults
from _hf_reference import hf_model, hf_numel, hf_training_flop_counts
from modelplan.count.flops import count_flops
from modelplan.count.memory import count_memory
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

BERT = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=96, vocab_size=100,
            max_position_embeddings=40, type_vocab_size=2, num_labels=3)
"""A tiny BERT-shaped config in the BERT config classes' key names."""

ENCODER_HEADS = ["Model", "ForMaskedLM", "ForCausalLM", "ForSequenceClassification", "ForTokenClassification",
                 "ForQuestionAnswering", "ForMultipleChoice"]

ENCODERS = [
    ("Electra", dict(embedding_size=32), ENCODER_HEADS + ["ForPreTraining"]),
    ("Electra", dict(embedding_size=64), ["Model", "ForMaskedLM", "ForPreTraining"]),  # no embeddings_project
    ("RoFormer", dict(embedding_size=32), ENCODER_HEADS),
    ("RoFormer", dict(embedding_size=64), ["Model", "ForMaskedLM"]),
    ("RemBert", dict(input_embedding_size=24, output_embedding_size=40), ENCODER_HEADS),
    ("RoCBert", dict(pronunciation_vocab_size=30, pronunciation_embed_dim=16, shape_vocab_size=50, shape_embed_dim=8),
     ENCODER_HEADS + ["ForPreTraining"]),
    ("RoCBert", dict(pronunciation_vocab_size=30, pronunciation_embed_dim=16, shape_vocab_size=50, shape_embed_dim=8,
                     concat_input=False), ["Model", "ForMaskedLM"]),
    ("RoCBert", dict(pronunciation_vocab_size=30, pronunciation_embed_dim=16, shape_vocab_size=50, shape_embed_dim=8,
                     enable_shape=False), ["ForMaskedLM"]),
    ("Xmod", dict(languages=["en_XX", "de_DE", "fr_XX"], adapter_reduction_factor=4), ENCODER_HEADS),
    ("Xmod", dict(languages=["en_XX", "de_DE"], adapter_layer_norm=True, pre_norm=True), ["Model", "ForMaskedLM"]),
    ("BertGeneration", {}, ["Decoder", "Encoder"]),
    ("BigBird", dict(attention_type="original_full"), ["Model", "ForMaskedLM", "ForCausalLM", "ForPreTraining",
                                                       "ForTokenClassification", "ForMultipleChoice"]),
    ("BigBird", dict(use_bias=False, rescale_embeddings=True), ["ForMaskedLM"]),
]
"""(class prefix, config keys, heads) of the encoder-shaped types."""

TYPES = {"Electra": "electra", "RoFormer": "roformer", "RemBert": "rembert", "RoCBert": "roc_bert", "Xmod": "xmod",
         "BertGeneration": "bert-generation", "BigBird": "big_bird"}

CASES = [{**BERT, **extra, "model_type": TYPES[prefix], "architectures": [prefix + head]}
         for prefix, extra, heads in ENCODERS for head in heads]

DEC = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=96, vocab_size=100,
           max_position_embeddings=40)
MLA = dict(num_hidden_layers=3, hidden_size=64, num_attention_heads=4, num_key_value_heads=4, intermediate_size=96,
           moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1,
           kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16, vocab_size=100)
DECODERS = [
    dict(DEC, model_type="biogpt", architectures=["BioGptForCausalLM"]),
    dict(DEC, model_type="biogpt", architectures=["BioGptForCausalLM"], scale_embedding=False, tie_word_embeddings=False),
    dict(DEC, model_type="biogpt", architectures=["BioGptForTokenClassification"]),
    dict(DEC, model_type="biogpt", architectures=["BioGptForSequenceClassification"]),
    dict(DEC, model_type="biogpt", architectures=["BioGptModel"]),
    dict(DEC, model_type="gpt_neox_japanese", architectures=["GPTNeoXJapaneseForCausalLM"], num_hidden_layers=3,
         intermediate_multiple_size=3),
    dict(DEC, model_type="gpt_neox_japanese", architectures=["GPTNeoXJapaneseForCausalLM"], tie_word_embeddings=False),
    dict(DEC, model_type="gpt_neox_japanese", architectures=["GPTNeoXJapaneseModel"]),
    dict(DEC, model_type="bitnet", architectures=["BitNetForCausalLM"], num_key_value_heads=2),
    dict(DEC, model_type="bitnet", architectures=["BitNetModel"], num_key_value_heads=2),
    dict(DEC, model_type="modernbert-decoder", architectures=["ModernBertDecoderForCausalLM"], num_hidden_layers=4,
         pad_token_id=0),
    dict(DEC, model_type="modernbert-decoder", architectures=["ModernBertDecoderForCausalLM"], num_hidden_layers=3,
         pad_token_id=0, norm_bias=True, attention_bias=True, mlp_bias=True, classifier_bias=True,
         decoder_bias=False, tie_word_embeddings=False),
    dict(DEC, model_type="modernbert-decoder", architectures=["ModernBertDecoderModel"], num_hidden_layers=3,
         pad_token_id=0),
    dict(MLA, model_type="axk1", architectures=["AXK1ForCausalLM"]),
    dict(MLA, model_type="axk1", architectures=["AXK1ForCausalLM"], mlp_layer_types=["sparse", "dense", "sparse"]),
]
"""Tiny decoders (and A.X-K1's MLA MoE), in each config class's key names."""
CASES += DECODERS
XLM = dict(model_type="xlm", n_layers=2, emb_dim=64, n_heads=4, vocab_size=100, max_position_embeddings=40,
           num_labels=3, pad_token_id=0)
CASES += [dict(XLM, architectures=["XLM" + head]) for head in ("WithLMHeadModel", "Model", "ForSequenceClassification",
                                                                "ForTokenClassification", "ForQuestionAnsweringSimple")]
CASES += [dict(XLM, architectures=["XLMWithLMHeadModel"], n_langs=3, gelu_activation=False, causal=True),
          dict(XLM, architectures=["XLMWithLMHeadModel"], n_langs=3, use_lang_emb=False, sinusoidal_embeddings=True)]
"""XLM in XLMConfig's key names: one language (no language table), three (a table), three unused."""
CPMANT = dict(model_type="cpmant", num_hidden_layers=2, hidden_size=64, num_attention_heads=4, dim_head=16, dim_ff=96,
              vocab_size=100, prompt_types=2, prompt_length=3, segment_types=4, position_bias_num_buckets=16)
CASES += [dict(CPMANT, architectures=["CpmAntForCausalLM"]), dict(CPMANT, architectures=["CpmAntModel"]),
          dict(CPMANT, architectures=["CpmAntForCausalLM"], dim_head=8)]  # heads x dim_head < hidden
XLNET = dict(model_type="xlnet", n_layer=2, d_model=64, n_head=4, d_inner=96, vocab_size=100, num_labels=3, pad_token_id=0)
CASES += [dict(XLNET, architectures=["XLNet" + head]) for head in (
    "LMHeadModel", "Model", "ForSequenceClassification", "ForMultipleChoice", "ForTokenClassification",
    "ForQuestionAnsweringSimple")]

CAUSAL_LM = {"electra": "ElectraForCausalLM", "roformer": "RoFormerForCausalLM", "rembert": "RemBertForCausalLM",
             "roc_bert": "RoCBertForCausalLM", "xmod": "XmodForCausalLM", "bert-generation": "BertGenerationDecoder",
             "biogpt": "BioGptForCausalLM", "gpt_neox_japanese": "GPTNeoXJapaneseForCausalLM",
             "bitnet": "BitNetForCausalLM", "modernbert-decoder": "ModernBertDecoderForCausalLM",
             "axk1": "AXK1ForCausalLM", "big_bird": "BigBirdForCausalLM", "xlm": "XLMWithLMHeadModel",
             "cpmant": "CpmAntForCausalLM", "xlnet": "XLNetLMHeadModel"}
"""transformers' MODEL_FOR_CAUSAL_LM_MAPPING_NAMES entry of each type (the class hf_coverage.py counts)."""


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=[f"{d['architectures'][0]}-{i}" for i, d in enumerate(CASES)])
def test_total_equals_transformers_on_cpu(data):
    """Total parameters equal sum(p.numel()) of the transformers model built on CPU."""
    assert_total_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(CAUSAL_LM))
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults, built on the meta device as the causal-LM class."""
    data = {**class_defaults(model_type), "architectures": [CAUSAL_LM[model_type]]}
    assert count_params(from_hf_config(data)).total == hf_numel(data)


@pytest.mark.torch
def test_roformer_frozen_table_is_not_trainable():
    """RoFormer's sinusoidal embed_positions has requires_grad false: trainable = the parameters
    transformers trains (and the total still holds the table)."""
    data = next(d for d in CASES if d["architectures"] == ["RoFormerForMaskedLM"])
    model = hf_model(data, device="cpu")
    count = count_params(from_hf_config(data))
    assert count.trainable == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert count.total - count.trainable == 40 * 64 // 4  # max_position_embeddings x head_dim


@pytest.mark.torch
def test_roformer_frozen_table_has_no_gradient_or_optimizer_state():
    """Memory: bf16 weights cover every parameter, the fp32 gradients, master copy and Adam's m, v
    (4 + 4 + 8 B, Megatron's mixed-precision accounting) only those transformers trains."""
    data = next(d for d in CASES if d["architectures"] == ["RoFormerForMaskedLM"])
    model = hf_model(data, device="cpu")
    total = sum(p.numel() for p in model.parameters())
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    mem = count_memory(from_hf_config(data), TrainingSpec(seq_len=12, precision="bf16", optimizer="adam"), 1)
    assert mem.model_states == 2 * total + 16 * trained


BATCH, SEQ = 2, 12
FLOP_CASES = [d for d in CASES if d["architectures"][0].endswith(("ForMaskedLM", "ForCausalLM", "ForPreTraining",
                                                                    "ForSequenceClassification", "Decoder", "LMHeadModel"))
              and d["model_type"] not in ("xmod", "roc_bert", "big_bird", "cpmant", "xlnet")
              or d["architectures"] == ["RoCBertForMaskedLM"]]  # CPM-Ant's forward prepends its prompt tokens


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", FLOP_CASES, ids=[f"{d['architectures'][0]}-{i}" for i, d in enumerate(FLOP_CASES)])
def test_training_flops_equal_flop_counter(data):
    """One forward + backward of the HF module on CPU (eager) counts exactly our model FLOPs:
    factored embeddings' projection, the transform at its width, RoCBert's map_inputs_layer, the
    discriminator's per-token dense, MoE with its output norm (norms are not matmuls)."""
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ)).model
    assert ours == sum(hf_training_flop_counts(data, BATCH, SEQ).values())


@pytest.mark.torch
@pytest.mark.slow
def test_xmod_flops_count_one_adapter_per_token():
    """X-MOD with three languages, every token in the default one: FlopCounterMode sees one
    adapter's two GEMMs per token (the others get no rows), as extras.adapter counts."""
    data = {**next(d for d in CASES if d["architectures"] == ["XmodForMaskedLM"]), "default_language": "de_DE"}
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ)).model
    assert ours == sum(hf_training_flop_counts(data, BATCH, SEQ).values())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("arch", ["BigBirdForMaskedLM", "BigBirdForPreTraining"])
def test_big_bird_flops_but_the_unread_pooler_backward(arch):
    """BigBird (original_full): FlopCounterMode equals ours less the backward of what the MLM loss
    does not read: the pooler (2 x 2 b h^2: its input and weight gradients) and the NSP classifier
    (2 x 2 b h 2) that BigBirdModel runs in every head class."""
    data = next(d for d in CASES if d["architectures"] == [arch] and d.get("attention_type") == "original_full")
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ)).model
    unread = 2 * 2 * BATCH * 64 * 64 + (2 * 2 * BATCH * 64 * 2 if arch.endswith("PreTraining") else 0)
    assert ours - unread == sum(hf_training_flop_counts(data, BATCH, SEQ).values())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("attn_type", "positions"), [("bi", 2 * SEQ), ("uni", SEQ + 1)])
def test_xlnet_flops_but_the_constant_encoding_gradient(attn_type, positions):
    """XLNet: FlopCounterMode equals ours less one matmul per block that autograd skips: the input
    gradient of the r projection (its input is the sinusoidal encoding, a constant), 2 b P h q."""
    data = dict(XLNET, architectures=["XLNetLMHeadModel"], attn_type=attn_type)
    ours = count_flops(from_hf_config(data), TrainingSpec(global_batch=BATCH, seq_len=SEQ)).model
    skipped = 2 * 2 * BATCH * positions * 64 * 64
    assert ours - skipped == sum(hf_training_flop_counts(data, BATCH, SEQ).values())


def test_big_bird_block_sparse_keys_per_query():
    """block_sparse (the default) prices (5 + num_random_blocks) x block_size keys a query (Zaheer et
    al. 2020, sec. 2): 3 random blocks of 64 give 512 keys, so at seq_len 4096 the score FLOPs are
    512 / 4096 of original_full's."""
    base = {**BERT, "model_type": "big_bird", "architectures": ["BigBirdForMaskedLM"], "max_position_embeddings": 4096}
    training = TrainingSpec(global_batch=1, seq_len=4096)
    sparse = count_flops(from_hf_config(base), training).breakdown["layers/attention/score"]
    full = count_flops(from_hf_config({**base, "attention_type": "original_full"}), training).breakdown[
        "layers/attention/score"]
    assert sparse * 4096 == full * 512


@pytest.mark.parametrize(("arch", "features"), [
    ("ElectraForMaskedLM", ["extras.input_width"]), ("RoFormerForMaskedLM", ["extras.frozen_position_width"]),
    ("RemBertForMaskedLM", ["extras.head_width", "extras.head_untied"]), ("RoCBertForMaskedLM", ["extras.concat_tables"]),
    ("XmodForMaskedLM", ["extras.adapter"]), ("BioGptForCausalLM", ["extras.position_offset"]),
    ("GPTNeoXJapaneseForCausalLM", ["extras.out_bias_blocks"]), ("BitNetForCausalLM", ["extras.sub_norms"]),
    ("ModernBertDecoderForCausalLM", ["extras.no_input_norm_blocks"]), ("AXK1ForCausalLM", ["extras.moe_output_norm"]),
    ("BigBirdForMaskedLM", ["pooler"]), ("CpmAntForCausalLM", ["position=relative", "extras.token_extra_rows"]),
    ("XLNetLMHeadModel", ["extras.xl_relative", "extras.mask_embedding"]),
])
def test_count_plan_run_and_verify_names_the_options(arch, features, tmp_path):
    """`count` and `plan --gpus 8` exit 0; verify refuses the options its executor does not run."""
    assert_count_plan_verify(tmp_path, next(d for d in CASES if d["architectures"] == [arch]), *features)


def test_adapter_and_sub_norm_counts_by_hand():
    """Hand-worked: X-MOD (h 64, 3 languages, b 16) adds per block 3 x (2 x 64 x 16 + 16 + 64) =
    6,384; BitNet (h 64, q 64, f 96, RMSNorm) adds per block attn_sub_norm 64 + ffn_sub_norm 96."""
    xmod = next(d for d in CASES if d["architectures"] == ["XmodForMaskedLM"])
    base = count_params(from_hf_config({**xmod, "model_type": "roberta", "architectures": ["RobertaForMaskedLM"]}))
    assert count_params(from_hf_config(xmod)).total - base.total == 2 * 3 * (2 * 64 * 16 + 16 + 64)
    bitnet = count_params(from_hf_config(DECODERS[8]))
    assert bitnet.breakdown["layers/attention/sub_norm"] == 2 * 64
    assert bitnet.breakdown["layers/mlp/sub_norm"] == 2 * 96


def test_biogpt_offset_rows_and_seq_cap():
    """BioGPT's table holds max_position_embeddings + 2 rows of h (2 x 64 more than a plain table),
    and the sequence cap stays max_position_embeddings."""
    count = count_params(from_hf_config(DECODERS[0]))
    assert count.breakdown["embedding/position"] == (40 + 2) * 64
    with pytest.raises(Exception, match=r"seq_len \(41\) exceeds max_positions \(40\)"):
        count_flops(from_hf_config(DECODERS[0]), TrainingSpec(global_batch=1, seq_len=41))


def test_bad_options_are_one_line_errors():
    """Bad values name their field in one line."""
    assert_one_line_error({**BERT, "model_type": "xmod", "languages": []}, "languages: empty")
    assert_one_line_error({**DEC, "model_type": "modernbert-decoder", "layer_types": ["full_attention"]}, "layer_types")
    assert_one_line_error({**MLA, "model_type": "axk1", "mlp_layer_types": ["dense"]}, "mlp_layer_types")
    assert_one_line_error({**BERT, "model_type": "bert-generation", "architectures": ["BertGenerationForMaskedLM"]},
                          "architectures: unsupported head")
    from modelplan.errors import SpecError, validate_model
    from modelplan.specs.transformer import TransformerSpec

    base = dict(layers=2, hidden=64, heads=4, ffn_hidden=96, vocab=100)
    with pytest.raises(SpecError, match=r"extras.out_bias_blocks: block 5 >= the model's 2 blocks"):
        validate_model(TransformerSpec, {**base, "extras": {"out_bias_blocks": [5]}}, "model")
    with pytest.raises(SpecError, match=r"tied_embeddings: the decoder reads 64 features but the token table is 32"):
        validate_model(TransformerSpec, {**base, "tied_embeddings": True, "extras": {"input_width": 32}}, "model")


LM_CASES = [d for d in CASES if d["architectures"][0].endswith(("ForMaskedLM", "ForCausalLM", "Decoder", "LMHeadModel"))
            and d["model_type"] not in ("big_bird", "cpmant")]  # BigBird's pooler; shard.py has no relative-bias unit


@pytest.mark.parametrize("data", LM_CASES, ids=[f"{d['architectures'][0]}-{i}" for i, d in enumerate(LM_CASES)])
def test_planner_units_hold_every_parameter(data):
    """At tp = 1 the planner's units (plan/shard.py with plan/extras.py) hold exactly
    count_params' total for the language-model heads: factored tables, offset rows, adapters,
    sub-norms, the MLM transform at its width and RemBERT's untied decoder (pooler and classifier
    heads are not in shard.py's units)."""
    from modelplan.plan.shard import unit_shards
    from modelplan.specs.plan import Plan

    spec = from_hf_config(data)
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total


def test_planner_kernels_run_the_adapter_and_the_transform_at_their_widths():
    """plan/kernels.py: X-MOD's block runs dense1 (t, h) @ (h, b) and dense2 (t, b) @ (b, h) on every
    tp rank; ELECTRA's head runs its transform (t, h) @ (h, E) and logits reading E features."""
    from modelplan.plan.kernels import head_kernels, layer_kernels

    xmod = from_hf_config(next(d for d in CASES if d["architectures"] == ["XmodForMaskedLM"]))
    gemms = {g.name: (g.m, g.n, g.k) for g in layer_kernels(xmod, 2, 1, 8, 2).gemms}
    assert gemms["adapter/in"] == (8, 16, 64) and gemms["adapter/out"] == (8, 64, 16)
    electra = from_hf_config(next(d for d in CASES if d["architectures"] == ["ElectraForMaskedLM"]))
    head = {g.name: (g.m, g.n, g.k) for g in head_kernels(electra, 1, 1, 8, 2, 100)[0]}
    assert head == {"head/transform": (8, 32, 64), "head/logits": (8, 100, 32)}


@pytest.mark.torch
def test_adapter_kept_bytes_equal_what_autograd_saves():
    """X-MOD's adapter keeps h + 2 b values a token for backward (count/extras.py); the independent
    count: the distinct tensors autograd saves running transformers' XmodAdapter in bf16 (dense1's
    input, the activation's input, dense2's input), through saved_tensors_hooks."""
    import torch
    from transformers.models.xmod.modeling_xmod import XmodAdapter

    from _hf_reference import hf_config
    from modelplan.count.blocks import block_of
    from modelplan.count.extras import block_extra_kept_bytes

    data = next(d for d in CASES if d["architectures"] == ["XmodForMaskedLM"])
    adapter = XmodAdapter(hf_config(data)).to(torch.bfloat16)
    saved: dict[int, int] = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.numel() * t.element_size()
        return t

    tokens = 6
    x = torch.randn(tokens, 64, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        adapter(x)
    weights = {p.untyped_storage().data_ptr() for p in adapter.parameters()}  # saved weights are not activations
    activations = sum(n for ptr, n in saved.items() if ptr not in weights)
    spec = from_hf_config(data)
    assert block_extra_kept_bytes(spec, block_of(spec, 0), 2) * tokens == activations


def test_megatron_export_notes_name_the_extras():
    """Megatron's GPT flags have no sub-norms or adapters: the export says so by option name."""
    from modelplan.export.megatron_model import model_args
    from modelplan.specs.plan import Plan

    notes: list[str] = []
    model_args(from_hf_config(DECODERS[8]), TrainingSpec(global_batch=8, seq_len=16), Plan(), notes)
    assert "extras.sub_norms: not a Megatron GPT option" in notes
