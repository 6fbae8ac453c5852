"""Megatron-LM export: golden tests against Megatron-LM's own example launch scripts.

Flag names and values are checked against NVIDIA/Megatron-LM:
- megatron/training/arguments.py (commit 000c4ac2): where each flag is defined;
- examples/gpt3/train_gpt3_175b_distributed.sh and examples/llama/train_llama3_8b_h100_fp8.sh
  (commit 157006d6): the values NVIDIA uses for GPT-3 175B and Llama-3-8B.
"""

import shutil
import subprocess

import pytest

from _megatron_rules import GENERATED_FLAGS, HAND_FLAGS

from modelplan.export.megatron import megatron_arguments, to_megatron
from modelplan.specs.hardware import Accelerator, Cluster, Link
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec

# Every flag Megatron-LM core_v0.16.1 defines that this export may emit: written in arguments.py
# or generated there from megatron-core's TransformerConfig (tests/_megatron_rules.py).
DOCUMENTED_FLAGS = set(HAND_FLAGS) | GENERATED_FLAGS

# GPT-3 175B (Brown et al. 2020 Table 2.1: 96 layers, d_model 12288, 96 heads, context 2048);
# GPT-2-style blocks: learned positions, LayerNorm with bias, GeLU MLP 4h, all biases, tied head.
GPT3_175B = TransformerSpec(
    name="gpt3-175b", layers=96, hidden=12288, heads=96, ffn_hidden=4 * 12288, vocab=50257,
    max_positions=2048, position="learned", norm="layernorm", norm_bias=True, qkv_bias=True,
    attn_out_bias=True, mlp_bias=True, gated_mlp=False, activation="gelu", tied_embeddings=True,
    dropout=True,
)
# Llama-3-8B (HF config.json: 32 layers, hidden 4096, 32 heads, 8 kv heads, intermediate 14336,
# vocab 128256, rope, RMSNorm, SwiGLU, untied, no biases).
LLAMA3_8B = TransformerSpec(
    name="llama-3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
    vocab=128256, max_positions=8192,
)


def _flags(model, training, plan):
    return megatron_arguments(model, training, plan).flags()


def test_gpt3_175b_matches_nvidia_example():
    """The 175B example's model, batch, precision and parallel flags come out with its values.

    examples/gpt3/train_gpt3_175b_distributed.sh: --num-layers 96 --hidden-size 12288
    --num-attention-heads 96 --seq-length 2048 --max-position-embeddings 2048
    --micro-batch-size 1 --global-batch-size 1536 --fp16 --tensor-model-parallel-size 8
    --pipeline-model-parallel-size 16.
    """
    flags = _flags(GPT3_175B, TrainingSpec(global_batch=1536, seq_len=2048, precision="fp16"),
                   Plan(dp=1, tp=8, pp=16, micro_batch=1))
    expected = {
        "--num-layers": "96", "--hidden-size": "12288", "--num-attention-heads": "96",
        "--seq-length": "2048", "--max-position-embeddings": "2048", "--micro-batch-size": "1",
        "--global-batch-size": "1536", "--fp16": None, "--tensor-model-parallel-size": "8",
        "--pipeline-model-parallel-size": "16",
    }
    assert {k: flags.get(k, "MISSING") for k in expected} == expected


def test_gpt3_keeps_megatron_defaults():
    """GPT-3's architecture is Megatron's default: no --swiglu, no untying, biases kept.

    The 175B example passes none of these flags (arguments.py defaults: gelu MLP, tied
    embeddings, add_bias_linear=True).
    """
    flags = _flags(GPT3_175B, TrainingSpec(global_batch=1536, seq_len=2048, precision="fp16"),
                   Plan(dp=1, tp=8, pp=16))
    for absent in ("--swiglu", "--untie-embeddings-and-output-weights", "--disable-bias-linear",
                   "--group-query-attention"):
        assert absent not in flags


def test_llama3_8b_matches_nvidia_example():
    """Llama-3-8B flags match examples/llama/train_llama3_8b_h100_fp8.sh.

    That script passes --ffn-hidden-size 14336 --group-query-attention --num-query-groups 8
    --kv-channels 128 --seq-length 8192 --position-embedding-type rope --swiglu
    --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0.0
    --hidden-dropout 0.0 --micro-batch-size 1 --global-batch-size 128 --bf16
    --fp8-format hybrid --use-distributed-optimizer.
    """
    flags = _flags(LLAMA3_8B, TrainingSpec(global_batch=128, seq_len=8192, precision="fp8"),
                   Plan(dp=8, micro_batch=1, zero=1))
    expected = {
        "--ffn-hidden-size": "14336", "--group-query-attention": None,
        "--num-query-groups": "8", "--kv-channels": "128", "--seq-length": "8192",
        "--position-embedding-type": "rope", "--swiglu": None,
        "--untie-embeddings-and-output-weights": None, "--disable-bias-linear": None,
        "--attention-dropout": "0.0", "--hidden-dropout": "0.0", "--micro-batch-size": "1",
        "--global-batch-size": "128", "--bf16": None, "--fp8-format": "hybrid",
        "--use-distributed-optimizer": None,
    }
    assert {k: flags.get(k, "MISSING") for k in expected} == expected


def test_rmsnorm_choice_spelling():
    """--normalization takes 'RMSNorm' (arguments.py choices ['LayerNorm', 'RMSNorm'])."""
    flags = _flags(LLAMA3_8B, TrainingSpec(global_batch=8, seq_len=8192), Plan(dp=8))
    assert flags["--normalization"] == "RMSNorm"


def test_interleaved_schedule_sets_virtual_stages():
    """vpp=4 -> --num-virtual-stages-per-pipeline-rank 4 (arguments.py, distributed group)."""
    flags = _flags(LLAMA3_8B, TrainingSpec(global_batch=16, seq_len=4096),
                   Plan(dp=1, pp=2, vpp=4, schedule="interleaved"))
    assert flags["--num-virtual-stages-per-pipeline-rank"] == "4"
    assert flags["--pipeline-model-parallel-size"] == "2"


def test_full_recompute_flags():
    """Full recompute of every layer: granularity full, method uniform, 1 layer per unit.

    arguments.py: --recompute-granularity choices ['full', 'selective'], --recompute-method
    choices ['uniform', 'block'], --recompute-num-layers = layers per uniform unit.
    """
    flags = _flags(LLAMA3_8B, TrainingSpec(global_batch=8, recompute="full"), Plan(dp=8))
    assert (flags["--recompute-granularity"], flags["--recompute-method"],
            flags["--recompute-num-layers"]) == ("full", "uniform", "1")


def test_zero3_maps_to_megatron_fsdp():
    """ZeRO-3 -> --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params
    (arguments.py choices ['no_shard', 'optim', 'optim_grads', 'optim_grads_params'])."""
    flags = _flags(LLAMA3_8B, TrainingSpec(global_batch=8), Plan(dp=8, zero=3))
    assert "--use-megatron-fsdp" in flags
    assert flags["--data-parallel-sharding-strategy"] == "optim_grads_params"


# Mixtral-8x7B (HF config.json: 32 layers, hidden 4096, 32 heads, 8 kv heads, 8 experts of
# intermediate 14336, 2 per token, vocab 32000).
MIXTRAL = TransformerSpec(
    name="mixtral-8x7b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
    vocab=32000, max_positions=32768,
    moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden=14336),
)


def test_moe_flags():
    """Mixtral: --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 14336, ep=8."""
    flags = _flags(MIXTRAL, TrainingSpec(global_batch=64), Plan(dp=8, ep=8, tp=2))
    assert (flags["--num-experts"], flags["--moe-router-topk"], flags["--moe-ffn-hidden-size"],
            flags["--expert-model-parallel-size"]) == ("8", "2", "14336", "8")


def test_expert_tensor_parallel_flag():
    """Plan.etp is Megatron-core's --expert-tensor-parallel-size (etp 1 folds ep 8 over tp 2 x
    dp 4); unset, the experts are split like the dense MLPs: tp."""
    flags = _flags(MIXTRAL, TrainingSpec(global_batch=64), Plan(dp=4, ep=8, tp=2, etp=1, sequence_parallel=True))
    assert (flags["--expert-model-parallel-size"], flags["--expert-tensor-parallel-size"]) == ("8", "1")
    flags = _flags(MIXTRAL, TrainingSpec(global_batch=64), Plan(dp=8, ep=8, tp=2))
    assert flags["--expert-tensor-parallel-size"] == "2"


def test_ep_comm_overlap_flag():
    """training.ep_comm_overlap is Megatron-core's overlap_moe_expert_parallel_comm
    (--overlap-moe-expert-parallel-comm, generated from its config); off, no flag."""
    flags = _flags(MIXTRAL, TrainingSpec(global_batch=64, ep_comm_overlap=True), Plan(dp=8, ep=8, tp=2))
    assert "--overlap-moe-expert-parallel-comm" in flags and "--overlap-moe-expert-parallel-comm" in DOCUMENTED_FLAGS
    assert "--overlap-moe-expert-parallel-comm" not in _flags(MIXTRAL, TrainingSpec(global_batch=64),
                                                               Plan(dp=8, ep=8, tp=2))


def test_moe_layer_pattern_with_dense_prefix():
    """4 layers, first one dense: per-layer pattern [0,1,1,1] (1 = expert layer, arguments.py
    moe_freq_type's list form)."""
    model = MIXTRAL.model_copy(update={
        "layers": 4, "moe": MoESpec(num_experts=8, top_k=2, expert_ffn_hidden=64,
                                    first_dense_layers=1)})
    flags = _flags(model, TrainingSpec(global_batch=8), Plan(dp=8))
    assert flags["--moe-layer-freq"] == "[0,1,1,1]"


@pytest.mark.parametrize("plan, model", [
    (Plan(dp=2, tp=2, pp=2, vpp=2, schedule="interleaved", sequence_parallel=True, zero=1,
          recompute="selective"), LLAMA3_8B),
    (Plan(dp=4, cp=2, zero=2, recompute="full"), LLAMA3_8B),
    (Plan(dp=8, ep=4, tp=2, sequence_parallel=True), MIXTRAL),
    (Plan(dp=1, tp=8, pp=16), GPT3_175B),
])
def test_every_flag_is_documented(plan, model):
    """Every emitted flag is defined in megatron/training/arguments.py (DOCUMENTED_FLAGS)."""
    training = TrainingSpec(global_batch=64, optimizer="momentum", precision="fp8")
    flags = _flags(model, training, plan)
    assert set(flags) - DOCUMENTED_FLAGS == set()


def test_gpipe_is_stated_as_unsupported():
    """Megatron has no GPipe schedule: the export says so in its notes and in the script."""
    plan = Plan(dp=1, pp=4, schedule="gpipe")
    export = to_megatron(LLAMA3_8B, TrainingSpec(global_batch=8), plan)
    assert any("GPipe" in note for note in export.unsupported)
    assert any(line.startswith("#") and "GPipe" in line for line in export.text.splitlines())


def test_alibi_is_stated_as_unsupported():
    """ALiBi has no --position-embedding-type choice: no flag, one note."""
    model = LLAMA3_8B.model_copy(update={"position": "alibi"})
    args = megatron_arguments(model, TrainingSpec(global_batch=8), Plan(dp=8))
    assert "--position-embedding-type" not in args.flags()
    assert any("alibi" in note for note in args.unsupported)


def _cluster(gpus_per_node):
    link = Link(name="l", bandwidth_gbps=100, latency_us=1)
    gpu = Accelerator(name="g", peak_tflops={"bf16": 1000}, memory_gb=80, memory_bw_tbps=3)
    return Cluster(name="c", accelerator=gpu, gpus_per_node=gpus_per_node, intra=link, inter=link)


def test_torchrun_geometry_fills_nodes():
    """32 ranks on 8-GPU nodes: --nproc_per_node 8 --nnodes 4 (32 / 8)."""
    export = to_megatron(LLAMA3_8B, TrainingSpec(global_batch=64),
                         Plan(dp=4, tp=4, pp=2), _cluster(8))
    text = export.text
    assert "--nproc_per_node 8\n" in text and "--nnodes 4\n" in text
    assert 'torchrun "${DISTRIBUTED_ARGS[@]}"' in text


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_script_is_valid_bash(tmp_path):
    """The snippet passes `bash -n` (syntax check) as generated."""
    export = to_megatron(MIXTRAL, TrainingSpec(global_batch=64, recompute="full"),
                         Plan(dp=8, ep=4, tp=2, sequence_parallel=True), _cluster(8))
    script = tmp_path / export.filename
    script.write_text(export.text)
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_qk_norm_flag():
    """Per-head q/k norms (Qwen3, OLMo-2) -> --qk-layernorm (arguments.py: 'Whether to layer
    normalize the q and k attention embeddings')."""
    model = LLAMA3_8B.model_copy(update={"qk_norm": True})
    assert "--qk-layernorm" in _flags(model, TrainingSpec(global_batch=8), Plan(dp=8))
    assert "--qk-layernorm" not in _flags(LLAMA3_8B, TrainingSpec(global_batch=8), Plan(dp=8))


def test_fsdp_unsets_cuda_device_max_connections():
    """validate_args (core_v0.16.1 l. 687-691): Megatron-FSDP needs CUDA_DEVICE_MAX_CONNECTIONS
    unset or > 1 and --ckpt-format fsdp_dtensor; ZeRO-3 -> optim_grads_params."""
    export = to_megatron(LLAMA3_8B, TrainingSpec(global_batch=64), Plan(dp=8, zero=3))
    assert "unset CUDA_DEVICE_MAX_CONNECTIONS" in export.text
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" not in export.text
    flags = _flags(LLAMA3_8B, TrainingSpec(global_batch=64), Plan(dp=8, zero=3))
    assert flags["--ckpt-format"] == "fsdp_dtensor"
    assert flags["--data-parallel-sharding-strategy"] == "optim_grads_params"


def test_long_context_raises_max_positions():
    """validate_args l. 829-832: max_position_embeddings >= seq_length; 64K tokens on an 8K
    rotary model -> 65536."""
    flags = _flags(LLAMA3_8B, TrainingSpec(global_batch=8, seq_len=65536), Plan(dp=8))
    assert flags["--max-position-embeddings"] == "65536"


def test_uneven_stages_use_first_and_last_flags():
    """Llama 3 405B: 126 layers on 16 stages = 7 + 14 x 8 + 7 (Dubey et al. 2024, sec. 3.3.2):
    --decoder-first/last-pipeline-num-layers 7, and the middle (126 - 14) / 14 = 8 each."""
    model = LLAMA3_8B.model_copy(update={"layers": 126})
    flags = _flags(model, TrainingSpec(global_batch=64), Plan(dp=4, pp=16))
    assert (flags["--decoder-first-pipeline-num-layers"],
            flags["--decoder-last-pipeline-num-layers"]) == ("7", "7")


def test_uneven_virtual_stages_use_the_layout():
    """80 layers on pp 4 x vpp 3 = 12 virtual stages: 80 = 12 * 6 + 8, the 8 extra blocks on
    the latest middle stages 10..3 (split_layers: late ranks hold the fewest micro-batches), so
    the layout is E+6 | 6 | 6 | 7 x 8 | 6+L, and no --num-virtual-stages-per-pipeline-rank
    (validate_args l. 503-514 allows only one)."""
    model = LLAMA3_8B.model_copy(update={"layers": 80})
    flags = _flags(model, TrainingSpec(global_batch=64),
                   Plan(dp=4, pp=4, vpp=3, schedule="interleaved"))
    assert flags["--pipeline-model-parallel-layout"] == "|".join(
        ["Et*6", "t*6", "t*6"] + ["t*7"] * 8 + ["t*6L"])
    assert "--num-virtual-stages-per-pipeline-rank" not in flags


def test_vocab_is_padded_as_the_plan_priced_it():
    """--make-vocab-size-divisible-by follows the plan's cost model (default 128, Megatron's)."""
    from modelplan.specs.costmodel import CostModel

    args = megatron_arguments(LLAMA3_8B, TrainingSpec(global_batch=8), Plan(dp=8),
                              CostModel(vocab_divisible_by=64))
    assert args.flags()["--make-vocab-size-divisible-by"] == "64"


def test_moe_names_dispatcher_and_expert_tensor_parallel():
    """Experts split over tp as modelplan plans them: --expert-tensor-parallel-size = tp, and
    tokens go to experts by all-to-all (--moe-token-dispatcher-type alltoall)."""
    flags = _flags(MIXTRAL, TrainingSpec(global_batch=64), Plan(dp=8, ep=4, tp=2))
    assert flags["--expert-tensor-parallel-size"] == "2"
    assert flags["--moe-token-dispatcher-type"] == "alltoall"


def test_interleaved_remainder_sets_one_microbatch_group():
    """megatron-core schedules.py (interleaved): micro-batches run in groups of
    microbatch_group_size_per_vp_stage (default pp) and a last group smaller than pp is refused;
    18 micro-batches on pp 4 (remainder 2) -> one group of 18
    (--microbatch-group-size-per-virtual-pipeline-stage, the field's argparse name)."""
    flags = _flags(LLAMA3_8B, TrainingSpec(global_batch=36),
                   Plan(dp=2, pp=4, vpp=2, schedule="interleaved"))
    assert flags["--microbatch-group-size-per-virtual-pipeline-stage"] == "18"
    even = _flags(LLAMA3_8B, TrainingSpec(global_batch=32),
                  Plan(dp=2, pp=4, vpp=2, schedule="interleaved"))
    assert "--microbatch-group-size-per-virtual-pipeline-stage" not in even


@pytest.mark.parametrize("change, rule", [
    # The failures: FSDP under CUDA_DEVICE_MAX_CONNECTIONS=1, FSDP without fsdp_dtensor,
    # a long-context plan with max_position_embeddings < seq_length.
    ({"env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}}, "CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset"),
    ({"drop": "--ckpt-format"}, "--ckpt-format fsdp_dtensor"),
    ({"set": ("--max-position-embeddings", "4096")}, "max-position-embeddings >= seq-length"),
    ({"set": ("--num-layers", "30")}, "layers divisible by pp"),
])
def test_rules_table_rejects_known_bad_launches(change, rule):
    """The validate_args table (tests/_megatron_rules.py) fails the launches Megatron refuses:
    start from an accepted ZeRO-3 pp-4 export at 8K tokens and break one thing."""
    from _megatron_rules import broken_rules, parse_flags, read_script

    export = to_megatron(LLAMA3_8B, TrainingSpec(global_batch=64, seq_len=8192),
                         Plan(dp=2, pp=4, zero=3))
    env, argv = read_script(export.text)
    flags = parse_flags(argv)
    assert broken_rules(flags, env, 8) == []
    env.update(change.get("env", {}))
    flags.pop(change.get("drop", ""), None)
    if "set" in change:
        flags[change["set"][0]] = change["set"][1]
    assert any(rule in broken for broken in broken_rules(flags, env, 8))


def test_yarn_rope_is_noted_not_silently_plain():
    """A YaRN model (gpt-oss: HF rope_scaling rope_type 'yarn', factor 32) exports plain RoPE
    arguments; Megatron-core needs YaRN's factor / original length / betas as config fields
    (megatron/core/models/common/embeddings/yarn_rotary_pos_embedding.py), which the spec does not
    hold, so the export must say so instead of writing a different model silently."""
    from modelplan.export.megatron_model import _rope_args

    notes: list[str] = []
    args = _rope_args(LLAMA3_8B.model_copy(update={"rope_scaling": "yarn", "rope_theta": 150000.0}), notes)
    assert ("--rotary-base", "150000") in args
    assert any("YaRN" in n for n in notes)
    plain: list[str] = []
    _rope_args(LLAMA3_8B.model_copy(update={"rope_theta": 500000.0}), plain)
    assert not any("YaRN" in n for n in plain)


def test_unfused_rotary_flag():
    """rope_fusion False -> --no-rope-fusion (arguments.py: store_false into apply_rope_fusion, whose
    default is on); the default writes nothing."""
    assert "--no-rope-fusion" in _flags(LLAMA3_8B, TrainingSpec(global_batch=8, rope_fusion=False), Plan(dp=8))
    assert "--no-rope-fusion" not in _flags(LLAMA3_8B, TrainingSpec(global_batch=8), Plan(dp=8))
