"""Megatron-LM's argument rules at tag core_v0.16.1 (commit 55ac7082517c3878ae653c07c09c534b8aed49f6),
restated as a checked table: Megatron-LM is not a package, so its `megatron/training/arguments.py`
cannot be imported in CI. Each rule below was read in that file's `validate_args` (line numbers
at that commit) and is re-implemented here, not copied; megatron-core 0.16.1 (the same release,
installed in CI) checks the rest through its own `TransformerConfig`.

Flags come from two places at that commit: hand-written `add_argument` calls, and
`ArgumentGroupFactory(TransformerConfig)` (`megatron/training/argument_utils.py`), which turns
each TransformerConfig field `name` into `--name-with-dashes` (booleans defaulting to True into
`--no-...` / `--disable-...`), unless the field is in `_add_network_size_args`'s exclude list.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

# Flags the exporter may write that arguments.py defines itself (add_argument; line at the tag)
# or that training_config.py's dataclasses generate (TrainingConfig / CheckpointConfig fields).
HAND_FLAGS = {
    "--max-position-embeddings": "arguments.py:1642",
    "--position-embedding-type": "arguments.py:1645",
    "--rotary-base": "arguments.py:1655",  # type=int
    "--rotary-percent": "arguments.py:1657",
    "--no-rope-fusion": "arguments.py:2045",  # action='store_false', dest='apply_rope_fusion'
    "--group-query-attention": "arguments.py:1630",
    "--make-vocab-size-divisible-by": "arguments.py:1678",
    "--openai-gelu": "arguments.py:1681",
    "--swiglu": "arguments.py:1687",
    "--untie-embeddings-and-output-weights": "arguments.py:1697",
    "--sgd-momentum": "arguments.py:1836",
    "--optimizer": "arguments.py:2056",
    "--lr": "arguments.py:2130",
    "--decoder-first-pipeline-num-layers": "arguments.py:2209",
    "--decoder-last-pipeline-num-layers": "arguments.py:2213",
    "--pipeline-model-parallel-layout": "arguments.py:2217",
    "--num-virtual-stages-per-pipeline-rank": "arguments.py:2230",
    "--use-distributed-optimizer": "arguments.py:2283",
    "--use-megatron-fsdp": "arguments.py:2305",
    "--data-parallel-sharding-strategy": "arguments.py:2307",
    "--vocab-size": "arguments.py:2373",
    "--tokenizer-type": "arguments.py:2386",
    "--mock-data": "arguments.py:2479",
    "--seq-length": "arguments.py:2482",
    "--decoder-seq-length": "arguments.py:2487",  # pretrain_t5.py: sequence_length_decoder
    "--num-experts": "arguments.py:2691",
    "--moe-layer-freq": "arguments.py:2693",
    "--micro-batch-size": "training_config.py:10 TrainingConfig",
    "--global-batch-size": "training_config.py:14 TrainingConfig",
    "--train-iters": "training_config.py:46 TrainingConfig",
    "--ckpt-format": "training_config.py:411 CheckpointConfig",
    # written for the plan's overlap and placement choices (modelplan/export/mechanisms.py): hand-
    # written add_argument calls of arguments.py (seen in the file; line at the tag not re-read)
    "--tp-comm-overlap": "arguments.py (_add_training_args)",
    "--overlap-grad-reduce": "arguments.py (_add_distributed_args)",
    "--overlap-param-gather": "arguments.py (_add_distributed_args)",
    "--use-tp-pp-dp-mapping": "arguments.py (_add_distributed_args)",
    # context parallel exchange (nargs '+', default ['p2p']; one value -> TransformerConfig.cp_comm_type, l. 1361)
    "--cp-comm-type": "arguments.py:2341",
}
# Flags the exporter may write that ArgumentGroupFactory generates from TransformerConfig /
# ModelParallelConfig fields (test_export_engines checks them against megatron-core 0.16.1).
GENERATED_FLAGS = {
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads",
    "--kv-channels", "--num-query-groups", "--normalization", "--norm-epsilon",
    "--disable-bias-linear", "--add-qkv-bias", "--qk-layernorm", "--attention-dropout",
    "--hidden-dropout", "--bf16", "--fp16", "--fp8-format", "--recompute-granularity",
    "--recompute-method", "--recompute-num-layers", "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size", "--context-parallel-size", "--expert-model-parallel-size",
    "--expert-tensor-parallel-size", "--sequence-parallel", "--microbatch-group-size-per-virtual-pipeline-stage",
    "--moe-router-topk", "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size",
    "--moe-expert-capacity-factor", "--moe-token-dispatcher-type", "--moe-flex-dispatcher-backend",
    "--overlap-moe-expert-parallel-comm",  # ModelParallelConfig.overlap_moe_expert_parallel_comm
    "--mtp-num-layers", "--mtp-loss-scaling-factor",  # TransformerConfig.mtp_num_layers / mtp_loss_scaling_factor
}
# TransformerConfig fields _add_network_size_args excludes from generation (those we could emit).
EXCLUDED_FIELDS = {"virtual_pipeline_model_parallel_size", "pipeline_model_parallel_layout",
                   "moe_layer_freq", "num_moe_experts", "fp8_param", "overlap_p2p_comm",
                   "params_dtype", "pipeline_dtype", "activation_func"}
# Generated flags whose TransformerConfig field has another name (field metadata arg_names).
RENAMED = {"--fp8-format": "fp8", "--norm-epsilon": "layernorm_epsilon"}


def generated_flags(transformer_config_cls) -> dict[str, str]:
    """Flag -> field for megatron-core's TransformerConfig, by ArgumentGroupFactory's naming."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(transformer_config_cls):
        if f.name in EXCLUDED_FIELDS or f.name.startswith("_"):
            continue
        names = (f.metadata.get("argparse_meta") or {}).get("arg_names")
        if names is None:
            dashed = f.name.replace("_", "-")
            names = ([f"--no-{dashed}", f"--disable-{dashed}"] if f.default is True
                     else [f"--{dashed}"])
        for name in names:
            out[name] = f.name
    return out


def read_script(text: str) -> tuple[dict[str, str | None], list[str]]:
    """The environment the launch script sets (None: unset) and the flags of its torchrun line
    (every `NAME=(...)` array but DISTRIBUTED_ARGS, in order)."""
    env: dict[str, str | None] = {}
    argv: list[str] = []
    in_array = None
    for line in text.splitlines():
        stripped = line.strip()
        if in_array is not None:
            if stripped == ")":
                in_array = None
            elif in_array != "DISTRIBUTED_ARGS":
                argv += shlex.split(stripped)
        elif stripped.endswith("=(") and not stripped.startswith("#"):
            in_array = stripped[:-2]
        elif stripped.startswith("export "):
            key, value = stripped[len("export "):].split("=", 1)
            env[key] = value
        elif stripped.startswith("unset "):
            env[stripped.split()[1]] = None
    return env, argv


def parse_flags(argv: list[str]) -> dict[str, str | None]:
    """--flag value pairs (None for a flag followed by another flag)."""
    flags: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        flag = argv[i]
        assert flag.startswith("--"), f"not a flag: {flag}"
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            values = [argv[i + 1]]
            i += 2
            while i < len(argv) and not argv[i].startswith("--"):  # nargs='*' flags (--recompute-modules)
                values.append(argv[i])
                i += 1
            flags[flag] = " ".join(values)
        else:
            flags[flag] = None
            i += 1
    return flags


def _int(flags, flag, default=1):
    value = flags.get(flag)
    return default if value is None else int(value)


def _vpp(flags) -> int | None:
    layout = flags.get("--pipeline-model-parallel-layout")
    pp = _int(flags, "--pipeline-model-parallel-size")
    if layout is not None:
        stages = layout.count("|") + 1  # no (...)*n groups in our layouts
        return stages // pp if stages // pp > 1 else None
    vpp = _int(flags, "--num-virtual-stages-per-pipeline-rank", 0)
    return vpp if vpp > 1 else None


Rule = tuple[str, Callable[[dict, dict, int], bool]]

RULES: list[Rule] = [
    # validate_args l. 317: world_size % (tp * pp * cp) == 0.
    ("world size divisible by tp * pp * cp",
     lambda f, env, world: world % (_int(f, "--tensor-model-parallel-size")
                                    * _int(f, "--pipeline-model-parallel-size")
                                    * _int(f, "--context-parallel-size")) == 0),
    # l. 503-514: at most one of the three virtual-pipeline arguments.
    ("one of --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank, "
     "--pipeline-model-parallel-layout",
     lambda f, env, world: sum(k in f for k in (
         "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
         "--pipeline-model-parallel-layout")) <= 1),
    # l. 519-524: layout stages divisible by pp.
    ("layout stages divisible by pp",
     lambda f, env, world: "--pipeline-model-parallel-layout" not in f or (
         f["--pipeline-model-parallel-layout"].count("|") + 1)
     % _int(f, "--pipeline-model-parallel-size") == 0),
    # l. 558-571: without vpp, layout or first/last stage sizes, layers % pp == 0.
    ("layers divisible by pp (even split)",
     lambda f, env, world: any(k in f for k in (
         "--pipeline-model-parallel-layout", "--num-virtual-stages-per-pipeline-rank",
         "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"))
     or _int(f, "--num-layers") % _int(f, "--pipeline-model-parallel-size") == 0),
    # l. 573-580: interleaving needs pp > 1 (--overlap-p2p-communication is on by default: the
    # flag at l. 2232 is --no-overlap-p2p-communication, store_false).
    ("interleaved schedule needs pp > 1",
     lambda f, env, world: _vpp(f) is None or _int(f, "--pipeline-model-parallel-size") > 1),
    # l. 687-691: Megatron-FSDP needs CUDA_DEVICE_MAX_CONNECTIONS != 1 and fsdp_dtensor.
    ("Megatron-FSDP: CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset",
     lambda f, env, world: "--use-megatron-fsdp" not in f
     or env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1"),
    ("Megatron-FSDP: --ckpt-format fsdp_dtensor",
     lambda f, env, world: "--use-megatron-fsdp" not in f or f.get("--ckpt-format") == "fsdp_dtensor"),
    # l. 1049-1050: fsdp_dtensor only with Megatron-FSDP.
    ("--ckpt-format fsdp_dtensor only with Megatron-FSDP",
     lambda f, env, world: f.get("--ckpt-format") != "fsdp_dtensor" or "--use-megatron-fsdp" in f),
    # l. 817-820: cp > 1 needs seq_length % (2 * cp) == 0.
    ("seq-length a multiple of 2 * cp",
     lambda f, env, world: _int(f, "--context-parallel-size") == 1
     or _int(f, "--seq-length") % (2 * _int(f, "--context-parallel-size")) == 0),
    # l. 406-408: a2a+p2p needs --hierarchical-context-parallel-sizes.
    ("--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes",
     lambda f, env, world: "a2a+p2p" not in f.get("--cp-comm-type", "")
     or "--hierarchical-context-parallel-sizes" in f),
    # Transformer Engine attn_forward_func_with_cp: "p2p" | "all_gather" | "a2a" | "a2a+p2p", else
    # ValueError("Unsupported communication type"); Megatron's help text spells it "allgather", TE does not.
    ("--cp-comm-type one of Transformer Engine's p2p, all_gather, a2a, a2a+p2p",
     lambda f, env, world: f.get("--cp-comm-type", "p2p") in ("p2p", "all_gather", "a2a", "a2a+p2p")),
    # TE AttnFuncWithCPAndQKVOA2A.forward: q and k heads per TP rank divisible by cp ("The number of
    # attention heads needs to be divisible by CP size!").
    ("--cp-comm-type a2a: heads and query groups per TP rank divisible by cp",
     lambda f, env, world: f.get("--cp-comm-type") != "a2a" or all(
         (_int(f, flag, _int(f, "--num-attention-heads")) // _int(f, "--tensor-model-parallel-size"))
         % _int(f, "--context-parallel-size") == 0 for flag in ("--num-attention-heads", "--num-query-groups"))),
    # l. 829-832: max_position_embeddings >= seq_length.
    ("max-position-embeddings >= seq-length",
     lambda f, env, world: _int(f, "--max-position-embeddings") >= _int(f, "--seq-length")),
    # l. 833-834: max_position_embeddings >= decoder_seq_length (when given).
    ("max-position-embeddings >= decoder-seq-length",
     lambda f, env, world: "--decoder-seq-length" not in f
     or _int(f, "--max-position-embeddings") >= _int(f, "--decoder-seq-length")),
    # l. 927-953 (pre-Blackwell): tp > 1 or cp > 1 without FSDP needs CUDA_DEVICE_MAX_CONNECTIONS=1.
    ("tp or cp > 1 without FSDP: CUDA_DEVICE_MAX_CONNECTIONS=1",
     lambda f, env, world: (_int(f, "--tensor-model-parallel-size") == 1
                            and _int(f, "--context-parallel-size") == 1)
     or "--use-megatron-fsdp" in f or env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1"),
    # l. 1025-1028: expert parallel needs experts, divisible by ep.
    ("num-experts divisible by expert-model-parallel-size",
     lambda f, env, world: _int(f, "--expert-model-parallel-size") == 1
     or _int(f, "--num-experts", 0) % _int(f, "--expert-model-parallel-size") == 0),
    # l. 899-902: --recompute-method is not allowed with selective recompute.
    ("selective recompute takes no --recompute-method",
     lambda f, env, world: f.get("--recompute-granularity") != "selective"
     or "--recompute-method" not in f),
]
"""(what, holds(flags, env, world_size)) for each rule of validate_args the exports touch."""


def broken_rules(flags: dict, env: dict, world: int) -> list[str]:
    """The rules a launch breaks (empty: Megatron-LM's validate_args lets it through)."""
    return [what for what, holds in RULES if not holds(flags, env, world)]


def transformer_config_kwargs(flags: dict) -> dict:
    """megatron-core TransformerConfig arguments from the flags, as Megatron-LM's
    core_transformer_config_from_args maps them at the tag (arguments.py l. 1306-1336): fields
    of the same name, plus num_experts -> num_moe_experts, decoder-first/last -> num_layers_in_*,
    swiglu -> gated_linear_unit with SiLU, group-query-attention -> num_query_groups."""
    import torch
    import torch.nn.functional as F

    ints = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels",
            "tensor_model_parallel_size", "pipeline_model_parallel_size",
            "context_parallel_size", "expert_model_parallel_size", "expert_tensor_parallel_size",
            "moe_router_topk", "moe_ffn_hidden_size", "recompute_num_layers",
            "moe_shared_expert_intermediate_size", "mtp_num_layers")
    kw: dict = {}
    for name in ints:
        value = flags.get("--" + name.replace("_", "-"))
        if value is not None:
            kw[name] = int(value)
    for flag, field in (("--normalization", "normalization"),
                        ("--recompute-granularity", "recompute_granularity"),
                        ("--recompute-method", "recompute_method"),
                        ("--moe-token-dispatcher-type", "moe_token_dispatcher_type"),
                        ("--moe-flex-dispatcher-backend", "moe_flex_dispatcher_backend"),
                        ("--fp8-format", "fp8"),
                        ("--cp-comm-type", "cp_comm_type")):  # l. 1361: one value -> its string
        if flags.get(flag) is not None:
            kw[field] = flags[flag]
    if "--moe-grouped-gemm" in flags:
        kw["moe_grouped_gemm"] = True
    if flags.get("--recompute-modules") is not None:  # nargs='*': a list of module names
        kw["recompute_modules"] = flags["--recompute-modules"].split()
    for flag, field in (("--attention-dropout", "attention_dropout"),
                        ("--hidden-dropout", "hidden_dropout"),
                        ("--norm-epsilon", "layernorm_epsilon"),
                        ("--moe-expert-capacity-factor", "moe_expert_capacity_factor"),
                        ("--mtp-loss-scaling-factor", "mtp_loss_scaling_factor")):
        if flags.get(flag) is not None:
            kw[field] = float(flags[flag])
    group = flags.get("--microbatch-group-size-per-virtual-pipeline-stage")
    if group is not None:  # field metadata renames microbatch_group_size_per_vp_stage's flag
        kw["microbatch_group_size_per_vp_stage"] = int(group)
    kw["sequence_parallel"] = "--sequence-parallel" in flags
    kw["add_bias_linear"] = "--disable-bias-linear" not in flags
    kw["add_qkv_bias"] = "--add-qkv-bias" in flags or kw["add_bias_linear"]
    kw["qk_layernorm"] = "--qk-layernorm" in flags
    if "--num-experts" in flags:
        kw["num_moe_experts"] = int(flags["--num-experts"])
    if "--moe-layer-freq" in flags:
        kw["moe_layer_freq"] = [int(x) for x in flags["--moe-layer-freq"].strip("[]").split(",")]
    if "--group-query-attention" in flags:
        kw["num_query_groups"] = int(flags["--num-query-groups"])
    if "--swiglu" in flags:
        kw["gated_linear_unit"], kw["activation_func"] = True, F.silu
    for flag, field in (("--decoder-first-pipeline-num-layers", "num_layers_in_first_pipeline_stage"),
                        ("--decoder-last-pipeline-num-layers", "num_layers_in_last_pipeline_stage")):
        if flag in flags:
            kw[field] = int(flags[flag])
    if "--pipeline-model-parallel-layout" in flags:
        kw["pipeline_model_parallel_layout"] = flags["--pipeline-model-parallel-layout"]
    vpp = _vpp(flags)
    if vpp is not None and "--pipeline-model-parallel-layout" not in flags:
        kw["virtual_pipeline_model_parallel_size"] = vpp
    dtype = torch.bfloat16 if "--bf16" in flags else torch.float16 if "--fp16" in flags else None
    kw["bf16"], kw["fp16"] = "--bf16" in flags, "--fp16" in flags
    if dtype is not None:
        kw["params_dtype"] = kw["pipeline_dtype"] = dtype
    return kw
