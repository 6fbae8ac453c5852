"""Training engines as data (specs/engine.py, presets/frameworks, plan/engine.py) and the
engine-specific formulas: eager composites (count/eager.py), selective-AC policies
(count/checkpointing.py), fp8 recipes (plan/fp8.py), FSDP/ZeRO-3 (plan/fsdp.py)."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError

from modelplan.cli import options
from modelplan.count.checkpointing import block_matmuls, op_sac_kept_per_token, op_sac_recomputed_fraction, op_sac_saved
from modelplan.count.eager import cross_entropy_bytes, rmsnorm_bytes, swiglu_bytes
from modelplan.count.loss_kernels import loss_kernel_peak_bytes
from modelplan.count.memory import activation_bytes_per_layer, output_activation_bytes
from modelplan.plan.compute import Roofline
from modelplan.plan.engine import engine_settings
from modelplan.plan.fp8 import cast_bytes_per_element, is_fp8_gemm, quantisation_bytes
from modelplan.plan.fsdp import Zero3Mode, hsdp_groups, zero3_mode, zero3_state_bytes
from modelplan.plan.kernels import Gemm
from modelplan.plan.memory import edge_activations
from modelplan.plan.parallel.tp import overlapped_fraction
from modelplan.presets import preset_names
from modelplan.specs import engine
from modelplan.specs.costmodel import CostModel
from modelplan.specs.load import load_engine, load_model
from modelplan.comm.clusters import load_cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

LLAMA = load_model("llama-3-8b")  # h 4096, 32 heads of 128, 8 KV heads, f 14336, SwiGLU, RMSNorm


def test_every_framework_has_a_profile():
    """One preset per Framework value, and the CLI offers exactly those choices."""
    assert preset_names("frameworks") == sorted(get_args(engine.Framework))
    assert get_args(options.Framework) == get_args(engine.Framework)
    assert get_args(options.AcMode) == get_args(engine.AcMode)
    assert get_args(options.Fp8Recipe) == get_args(engine.Fp8Recipe)


@pytest.mark.parametrize("name", get_args(engine.Framework))
def test_profiles_load(name):
    """Every profile validates and names its sources."""
    profile = load_engine(name)
    assert profile.name == name and profile.source


def test_run_settings_win_over_the_profile():
    """torchtitan means op SAC and eager ops unless the run says otherwise; compile fuses."""
    profile = load_engine("torchtitan")
    default = engine_settings(TrainingSpec(framework="torchtitan"), profile)
    assert (default.ac_mode, default.elementwise, default.fp8_recipe) == ("op_sac", "eager", None)
    run = TrainingSpec(framework="torchtitan", ac_mode="layer_sac", compile=True, precision="fp8", fp8_recipe="rowwise")
    chosen = engine_settings(run, profile)
    assert (chosen.ac_mode, chosen.elementwise, chosen.fp8_recipe) == ("layer_sac", "fused", "rowwise")
    fp8 = engine_settings(TrainingSpec(framework="megatron", precision="fp8"), load_engine("megatron"))
    assert fp8.fp8_recipe == "delayed"  # Megatron's --fp8-recipe default


def test_fp8_settings_need_fp8():
    """fp8_recipe and fp8_param_gather are refused under bf16, naming the field."""
    with pytest.raises(ValidationError, match="fp8_recipe"):
        TrainingSpec(fp8_recipe="delayed")
    with pytest.raises(ValidationError, match="fp8_param_gather"):
        TrainingSpec(fp8_param_gather=True)


def test_plan_hsdp_and_etp_checks():
    """fsdp_shard_size divides dp * cp; with etp the EP group folds over tp x dp."""
    with pytest.raises(ValidationError, match="fsdp_shard_size"):
        Plan(dp=12, fsdp_shard_size=8)
    Plan(dp=16, tp=2, ep=32, etp=1)  # Megatron-core: ep x etp = 32 of the 32 tp x dp ranks
    with pytest.raises(ValidationError, match="ep \\* etp"):
        Plan(dp=16, tp=2, ep=64, etp=1)


def test_eager_rmsnorm_bytes():
    """Sum of the passes in the docstring with d = 2: forward 6+8+4+8+6+4 = 36, backward
    10+6+16+12+12+6 = 62 (a fused norm moves 4 and 6)."""
    assert rmsnorm_bytes(2) == (36, 62)


def test_eager_swiglu_and_cross_entropy_bytes():
    """silu (2d) + product (3d) = 10 forward, 16 backward; cross-entropy d + 20 / d + 24."""
    assert swiglu_bytes(2) == (10, 16)
    assert cross_entropy_bytes(2) == (22, 26)


def test_loss_peak_per_logit():
    """Megatron's vocab-parallel CE keeps one fp32 copy beside the bf16 logits (4 + 2); eager
    holds three fp32 tensors (3 x 4)."""
    assert loss_kernel_peak_bytes("megatron", 2) == 6
    assert loss_kernel_peak_bytes("eager", 2) == 12


# Runs PyTorch's own cross-entropy on one gloo rank (CPU) under MemTracker and prints the peak
# bytes per logit: plain F.cross_entropy(logits.float()) and the same under loss_parallel() over
# DTensor Shard(-1) logits (torch/distributed/tensor/parallel/loss.py).
_LOSS_PEAK_SCRIPT = """
import contextlib, os, torch, torch.distributed as dist
os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = os.environ["PORT"]
dist.init_process_group("gloo", rank=0, world_size=1)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.parallel import loss_parallel
from torch.distributed._tools.mem_tracker import MemTracker
mesh = init_device_mesh("cpu", (1,))
N, V = 256, 4096
labels = torch.randint(0, V, (N,))
for sharded in (False, True):
    leaf = torch.randn(N, V, dtype=torch.bfloat16, requires_grad=True)
    tracker = MemTracker()
    with tracker:
        logits = leaf * 1.0
        if sharded:
            logits = DTensor.from_local(logits, mesh, [Shard(-1)])
        with loss_parallel() if sharded else contextlib.nullcontext():
            loss = torch.nn.functional.cross_entropy(logits.float(), labels)
            del logits
            loss.backward()
    peak = tracker.get_tracker_snapshot("peak")
    print(max(v[k] for v in peak.values() for k in v if str(k) == "Total") / (N * V))
dist.destroy_process_group()
"""


def test_eager_loss_peak_per_logit_as_pytorch_measures_it():
    """PyTorch's MemTracker over the real losses (one gloo rank, CPU): the eager loss peaks at 12
    bytes per logit, 16 under loss_parallel (`_nll_loss_and_log_softmax_backward` holds the saved
    log-softmax, the zeros gradient, exp(x) + grad and the product)."""
    pytest.importorskip("torch")
    import os
    import random
    import subprocess
    import sys

    env = {**os.environ, "PORT": str(random.randint(20000, 40000))}
    out = subprocess.run([sys.executable, "-c", _LOSS_PEAK_SCRIPT], capture_output=True, text=True, env=env,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    plain, sharded = (float(x) for x in out.stdout.split())
    assert round(plain) == loss_kernel_peak_bytes("eager", 2) == 12
    assert round(sharded) == loss_kernel_peak_bytes("eager", 2, loss_parallel=True) == 16


def test_loss_parallel_applies_to_the_eager_loss_at_tp_above_one():
    """torchtitan's head at tp 8 holds 16 bytes per logit of its V/8 shard, 12 at tp 1 (no DTensor
    loss); a compiled loss keeps 2 d either way (torchtitan 9dec370 parallel_dims.py)."""
    from modelplan.plan.memory import edge_activations

    s = 1024
    h, v = LLAMA.hidden, LLAMA.vocab
    _, head8 = edge_activations(LLAMA, 1, s, 2, 8, True, loss_kernel="eager", loss_parallel=True)
    assert head8 == -(-(4 * s * h + 16 * s * v) // 8)
    _, head1 = edge_activations(LLAMA, 1, s, 2, 1, False, loss_kernel="eager", loss_parallel=True)
    assert head1 == 4 * s * h + 12 * s * v
    _, compiled = edge_activations(LLAMA, 1, s, 2, 8, True, loss_kernel="compiled", loss_parallel=True)
    assert compiled == -(-(4 * s * h + 4 * s * v) // 8)
    assert load_engine("torchtitan").loss_parallel and not load_engine("megatron").loss_parallel


def test_compiled_loss_keeps_the_16_bit_logits_and_their_gradient():
    """torch.compile over F.cross_entropy(logits.float()): the bf16 logits saved and the bf16
    gradient written by one fused backward kernel, 2 + 2 bytes per logit (fp32: 4 + 4)."""
    assert loss_kernel_peak_bytes("compiled", 2) == 4
    assert loss_kernel_peak_bytes("compiled", 4) == 8
    sb = 1024
    _, eager = edge_activations(LLAMA, 1, sb, 2, 1, False, loss_kernel="eager")
    _, compiled = edge_activations(LLAMA, 1, sb, 2, 1, False, loss_kernel="compiled")
    assert eager - compiled == (12 - 4) * sb * LLAMA.vocab


def test_torchtitan_compiles_its_loss_unless_the_run_says_otherwise():
    """torchtitan's build_cross_entropy_loss compiles the loss under training.compile (since
    bbb1b616e); its Dec 2024 version (9dec370) did not; Megatron's loss is fused regardless."""
    titan, megatron = load_engine("torchtitan"), load_engine("megatron")
    base = dict(global_batch=8, seq_len=128, precision="bf16")
    assert engine_settings(TrainingSpec(**base, framework="torchtitan", compile=True), titan).loss_kernel == "compiled"
    assert engine_settings(TrainingSpec(**base, framework="torchtitan"), titan).loss_kernel == "eager"
    assert engine_settings(TrainingSpec(**base, framework="torchtitan", compile=True, compile_loss=False),
                           titan).loss_kernel == "eager"
    assert engine_settings(TrainingSpec(**base, compile=True), megatron).loss_kernel == "megatron"


def test_eager_loss_memory_on_the_last_stage():
    """Output activations: 2 d s b h plus 12 bytes per logit eager vs Megatron's estimator's 4."""
    sb = 1024
    estimator = output_activation_bytes(LLAMA, 1, sb, 2)
    eager = output_activation_bytes(LLAMA, 1, sb, 2, loss_bytes_per_logit=12)
    assert eager - estimator == 8 * sb * LLAMA.vocab


def test_op_sac_saves_every_other_matmul():
    """torchtitan's policy saves the 1st, 3rd, 5th, 7th mm: wq, wv, w1, w2 of a SwiGLU block."""
    assert [m[0] for m in block_matmuls(LLAMA)] == ["wq", "wk", "wv", "wo", "w1", "w3", "w2"]
    assert op_sac_saved(LLAMA) == {"wq", "wv", "w1", "w2"}


def test_op_sac_recomputed_fraction_llama_8b():
    """wk (4096 x 1024) + wo (4096 x 4096) + w3 (4096 x 14336) of all seven, by FLOPs."""
    h, kv, f = 4096, 1024, 14336
    total = h * h + 2 * h * kv + h * h + 3 * h * f
    assert op_sac_recomputed_fraction(LLAMA) == pytest.approx((h * kv + h * h + h * f) / total)


def test_op_sac_kept_bytes_llama_8b():
    """Per token, tp 1: block input h and w2 output h (replicated); wq (4096), wv (1024), w1
    (14336) outputs, attention output (4096) in bf16 and 4 bytes of lse per head (sharded)."""
    replicated, sharded = op_sac_kept_per_token(LLAMA, 2, tp=1)
    assert replicated == 2 * (4096 + 4096)
    assert sharded == 2 * (4096 + 1024 + 14336 + 4096) + 4 * 32
    assert activation_bytes_per_layer(LLAMA, 1, 8, 2, recompute="selective", attention="flash",
                                      ac_mode="op_sac") == 8 * (replicated + sharded)


def test_layer_sac_keeps_the_mean_of_full_and_none():
    """Every second block fully recomputed: (full + none) / 2 per block."""
    kw = dict(attention="flash")
    none = activation_bytes_per_layer(LLAMA, 1, 64, 2, recompute="none", **kw)
    full = activation_bytes_per_layer(LLAMA, 1, 64, 2, recompute="full", **kw)
    sac = activation_bytes_per_layer(LLAMA, 1, 64, 2, recompute="selective", ac_mode="layer_sac", ac_every=2, **kw)
    assert sac == (none + full) // 2


def test_eager_norm_keeps_its_fp32_input():
    """Eager RMSNorm keeps 4 + 2 bytes per element instead of 2: +4 h per norm, two per block;
    eager SwiGLU keeps silu's output too: +2 f."""
    kw = dict(recompute="none", attention="flash")
    fused = activation_bytes_per_layer(LLAMA, 1, 1, 2, **kw)
    eager = activation_bytes_per_layer(LLAMA, 1, 1, 2, elementwise="eager", **kw)
    assert eager - fused == 2 * 4 * 4096 + 2 * 14336


def test_fused_norm_alone_keeps_the_norm_input_only():
    """torchtitan's fused_rmsnorm under an otherwise eager engine: the two norms keep their
    16-bit input (2 B) instead of the eager composite's fp32 input and output (4 + 2 B), SwiGLU
    still keeps silu's output: eager - (eager, fused norm) = 2 x 4 h per token; the fused norm is
    one kernel each way (Elementwise 2d / 3d bytes) where the eager one launches 7 and 10."""
    from modelplan.count.eager import RMSNORM_KERNELS
    from modelplan.plan.kernels import layer_kernels

    kw = dict(recompute="none", attention="flash", elementwise="eager")
    eager = activation_bytes_per_layer(LLAMA, 1, 1, 2, **kw)
    fused_norm = activation_bytes_per_layer(LLAMA, 1, 1, 2, norm_elementwise="fused", **kw)
    assert eager - fused_norm == 2 * 4 * 4096
    norms = [e for e in layer_kernels(LLAMA, 1, 1, 16, 2, elementwise="eager", norm_elementwise="fused",
                                      attention="flash").elementwise if e.name == "norm"]
    assert {(e.kernels, e.fwd_bytes_per_element, e.bwd_bytes_per_element) for e in norms} == {((1, 1), 4, 6)}
    assert RMSNORM_KERNELS == (7, 10)
    settings = engine_settings(TrainingSpec(framework="torchtitan", fused_norm=True), load_engine("torchtitan"))
    assert (settings.elementwise, settings.norm_elementwise) == ("eager", "fused")


def test_te_fp8_keeps_linear_inputs_in_fp8():
    """Transformer Engine keeps 1-byte copies of the two norm outputs, the projection input and
    the second MLP GEMM's input: (2 h + q_width + f) bytes less per token (d = 2)."""
    kw = dict(recompute="none", attention="flash")
    bf16 = activation_bytes_per_layer(LLAMA, 1, 1, 2, **kw)
    fp8 = activation_bytes_per_layer(LLAMA, 1, 1, 2, fp8_inputs=True, **kw)
    assert bf16 - fp8 == 2 * 4096 + 4096 + 14336


def test_te_fp8_keeps_expert_inputs_in_fp8():
    """TE GroupedLinear experts keep 1-byte casts of each routed token copy and of each expert's
    fc2 input; the attention norm output and projection input are fp8 as in a dense block, the
    MLP norm output stays 16-bit for the router. Qwen3-235B-A22B sizes (HF config: h 4096, 64
    heads of 128, top_k 8, expert ffn 1536): (h + q_width + 8 h + 8 x 1536) bytes less per token."""
    spec = load_model("qwen3-235b-a22b")
    assert (spec.hidden, spec.q_width, spec.moe.top_k, spec.moe.expert_ffn_hidden) == (4096, 8192, 8, 1536)
    kw = dict(recompute="none", attention="flash", layer_index=0)
    bf16 = activation_bytes_per_layer(spec, 1, 1, 2, **kw)
    fp8 = activation_bytes_per_layer(spec, 1, 1, 2, fp8_inputs=True, **kw)
    assert bf16 - fp8 == 4096 + 8192 + 8 * 4096 + 8 * 1536


def test_fp8_cast_bytes_per_recipe():
    """Delayed scaling casts in one pass (read 2, write fp8 + transpose); current / tensorwise /
    rowwise read the 16-bit tensor twice."""
    assert cast_bytes_per_element("delayed", 2) == 4
    for recipe in ("current", "tensorwise", "rowwise", "blockwise"):
        assert cast_bytes_per_element(recipe, 2) == 6


def test_fp8_quantisation_te_vs_torchao():
    """TE: input forward, output gradient backward (weights cached); torchao also casts the weight
    forward and input + weight again in backward."""
    m, k, n = 8, 4, 2
    assert quantisation_bytes("delayed", 2, m, k, n, "te") == (4 * m * k, 4 * m * n)
    assert quantisation_bytes("tensorwise", 2, m, k, n, "torchao") == (6 * (m * k + k * n), 6 * (m * n + m * k + k * n))


def test_only_linear_layers_run_in_fp8():
    """Block linear GEMMs (and their backward) are fp8; attention core, router and head are not."""
    assert is_fp8_gemm("mlp/in") and is_fp8_gemm("attention/qkv/dgrad") and is_fp8_gemm("mlp/experts/out/wgrad")
    assert not any(map(is_fp8_gemm, ("attention/scores", "head/logits", "mlp/router")))


def test_roofline_picks_the_engine_attention_kernel():
    """On H100 TE's cuDNN kernel runs at 0.58 / 0.47 of the peak and SDPA's FlashAttention-2 at
    0.33 / 0.28 (causal, seq 8k: cudnn-frontend b740542 benchmark_results.csv, 572.9 / 463.5 and
    325.1 / 277.4 of 989.4 TFLOP/s); A100 lists only FlashAttention-2 (0.6 / 0.5)."""
    cost = CostModel()
    h100, a100 = load_cluster("dgx-h100").accelerator, load_cluster("dgx-a100").accelerator
    te = Roofline.of(h100, "bf16", cost, ("cudnn", "fa2"))
    sdpa = Roofline.of(h100, "bf16", cost, ("fa2",))
    assert te.flash_fwd_flops_per_s == pytest.approx(989.4e12 * 0.58 * cost.sustained_fraction)
    assert sdpa.flash_bwd_flops_per_s == pytest.approx(989.4e12 * 0.28 * cost.sustained_fraction)
    ampere = Roofline.of(a100, "bf16", cost, ("cudnn", "fa2"))
    assert ampere.flash_fwd_flops_per_s == pytest.approx(312e12 * 0.6 * cost.sustained_fraction)


def test_fp8_rate_only_for_fp8_gemms():
    """Under fp8 a block GEMM runs at the fp8 MAMF rate (0.709 of 1978.9 TFLOP/s on H100), any
    other GEMM at the bf16 one."""
    cost = CostModel(kernel_overhead_us=0)
    roof = Roofline.of(load_cluster("dgx-h100").accelerator, "fp8", cost)
    g = Gemm("mlp/in", 8192, 8192, 8192)
    fp8_s = roof.gemm_time_s(g, 2, fp8_factor=1.0)
    bf16_s = roof.gemm_time_s(g, 2)
    assert fp8_s == pytest.approx(g.flops / (1978.9e12 * 0.709 * cost.sustained_fraction))
    assert bf16_s == pytest.approx(g.flops / (989.4e12 * 0.803 * cost.sustained_fraction))


def test_tp_overlap_exposure():
    """Chunked overlap: the first of tp chunks waits, traffic beyond the GEMMs is exposed."""
    assert overlapped_fraction(1.0, 10.0, 8) == pytest.approx(1 / 8)
    assert overlapped_fraction(10.0, 4.0, 8) == pytest.approx(0.6)


def test_zero3_mode_follows_torchtitan():
    """'default': resharded without PP, kept across micro-batches under PP (torchtitan)."""
    sw = engine_settings(TrainingSpec(framework="torchtitan"), load_engine("torchtitan"))
    assert zero3_mode("default", sw, 1) == Zero3Mode(True, False)
    assert zero3_mode("default", sw, 8) == Zero3Mode(False, True)
    assert zero3_mode(True, sw, 8) == Zero3Mode(True, True)


def test_zero3_state_bytes_fsdp2():
    """FSDP2, 1000 params in units of 100 over 4 ranks, bf16 compute, fp32 grads and reduce,
    12 bytes of master + Adam: shards 4/4 grads, 12/4 states, no bf16 shard; two units gathered
    (2 x 100 x 2) and one unit's bf16 + fp32 gradient (100 x 6)."""
    w, g, o = zero3_state_bytes(1000, 100, 4, 2, 4, 12, Zero3Mode(True, False), False, 4)
    assert (w, g, o) == (400, 1000 + 600, 3000)
    # kept across micro-batches (PP): the whole stage gathered and its fp32 gradients accumulated
    w, g, o = zero3_state_bytes(1000, 100, 4, 2, 4, 12, Zero3Mode(False, True), False, 4)
    assert (w, g, o) == (2000, 1000 + 4000, 3000)
    # DeepSpeed keeps a bf16 shard too
    w, _, _ = zero3_state_bytes(1000, 100, 4, 2, 4, 12, Zero3Mode(True, False), True, 4)
    assert w == 1000 * 2 / 4 + 400


def test_hsdp_groups():
    """HSDP over 96 ranks in shards of 8: 12 replicas; no shard size: one group."""
    assert hsdp_groups(96, 8) == (8, 12)
    assert hsdp_groups(96, None) == (96, 1)


def test_deepspeed_bf16_zero1_keeps_bf16_grads_beside_fp32_ones():
    """DeepSpeed's BF16_Optimizer (bf16, ZeRO 0/1): the full fp32 gradient buffer (4 B/param)
    plus every parameter's bf16 .grad (2 B/param) at the end of backward; Megatron accumulates
    into its fp32 main_grad only (4 B/param). One rank of Llama 3 8B on tp 1, pp 1, dp 8."""
    from modelplan.plan.evaluator import Evaluator

    cluster = load_cluster("dgx-a100")
    grads = {}
    for framework in ("deepspeed", "megatron"):
        training = TrainingSpec(framework=framework, precision="bf16", global_batch=8)
        ev = Evaluator(LLAMA, training, cluster)
        params = sum(ev.held.rank_params(1, 1)[0][0])
        (_, grads[framework], _), _ = ev.held.states(1, 1, 8, 1)
    assert grads["megatron"] == 4 * params
    assert grads["deepspeed"] == (4 + 2) * params


def test_bf16_optimizer_accumulates_fp32_gradients_every_micro_batch():
    """DeepSpeed's BF16_Optimizer zeroes the bf16 .grad before every backward and adds it into the
    fp32 gradient after it (bf16_optimizer.py backward_prologue / update_hp_grads): 2 + (2 + 4 + 4)
    + (4 + 4) = 20 HBM bytes per parameter per micro-batch; ZeRO 2 reduces instead and does not."""
    from modelplan.plan.estimate import evaluate_plan
    from modelplan.plan.evaluator import Evaluator

    cluster = load_cluster("dgx-a100")
    training = TrainingSpec(framework="deepspeed", precision="bf16", global_batch=64)
    ev = Evaluator(LLAMA, training, cluster)
    params = sum(ev.held.rank_params(1, 1)[0][0])
    m = 64 // (2 * 8)  # micro-batches of 2 on each of 8 data-parallel ranks
    hbm = cluster.accelerator.memory_bw_tbps * 1e12 * ev.cost.hbm_efficiency * ev.cost.sustained_fraction
    step = {zero: evaluate_plan(ev, Plan(dp=8, micro_batch=2, zero=zero)).step for zero in (1, 2)}
    accumulate = step[1].optimizer_s - ev.dp_entry(1, 1, 8, 1, False, 0).optimizer_s
    assert accumulate == pytest.approx(m * params * 20 / hbm)
    assert step[2].optimizer_s == pytest.approx(ev.dp_entry(1, 1, 8, 2, False, 0).optimizer_s)
    assert sum(step[1].terms().values()) == pytest.approx(step[1].step_time_s)


def test_torchtitan_sequence_parallel_working_set_holds_the_gathered_inputs():
    """torchtitan's DTensor SP saves the all-gathered inputs of wq/wk/wv and w1/w3 (parallelize_llama
    apply_tp), Megatron the 1/tp shard: a fully recomputed Llama-3-8B block at tp 8 keeps the same
    2 s b h / t input, and its working set differs by two gathered inputs' 7/8: 2 x 2 s b h x 7/8."""
    from modelplan.plan.memory import block_activations

    titan, megatron = load_engine("torchtitan"), load_engine("megatron")
    base = dict(global_batch=8, seq_len=4096, precision="bf16", compile=True)
    assert titan.sp_saves_gathered_inputs and not megatron.sp_saves_gathered_inputs
    s_titan = engine_settings(TrainingSpec(**base, framework="torchtitan"), titan)
    s_mega = engine_settings(TrainingSpec(**base, framework="megatron"), megatron)
    sbh = 4096 * 2 * LLAMA.hidden
    args = (LLAMA, 2, 4096, 2, 8, True, "full", False, "flash")
    kept_t, work_t = block_activations(*args, software=s_titan)
    kept_m, work_m = block_activations(*args, software=s_mega)
    assert kept_t == kept_m == 2 * sbh // 8
    assert work_t - work_m == 2 * 2 * sbh * 7 // 8


def test_torchtitan_output_projection_keeps_its_gathered_input():
    """torchtitan's output ColwiseParallel(input_layouts=Shard(1)) all-gathers the final norm's
    output before the head GEMM, which saves it whole: d s b h x (1 - 1/t) more than Megatron's
    1/t share on the last stage (Llama-3-8B, s b = 8192, tp 8: 2 x 8192 x 4096 x 7/8 bytes)."""
    from modelplan.plan.memory import edge_activations

    args = (LLAMA, 2, 4096, 2, 8, True, 1, "eager")
    _, megatron = edge_activations(*args)
    _, titan = edge_activations(*args, gathered_inputs=True)
    assert titan - megatron == 2 * 8192 * 4096 * 7 // 8
    assert edge_activations(LLAMA, 2, 4096, 2, 8, False, 1, "eager", gathered_inputs=True)[1] == \
        edge_activations(LLAMA, 2, 4096, 2, 8, False, 1, "eager")[1]  # no SP: nothing gathered


def test_torchtitan_tensorwise_fp8_gathers_tp_activations_in_fp8():
    """torchtitan parallelize_llama.py: float8 all-gather with TP only for tensorwise recipes
    (torchao Float8ColwiseParallel casts the input to e4m3 before the forward AllGather,
    Float8RowwiseParallel the output gradient to e5m2 before the backward one); rowwise recipes
    and Megatron keep 16-bit gathers. The ReduceScatters stay 16-bit either way."""
    from modelplan.comm.ops import Collective
    from modelplan.plan.parallel.calls import RankCalls
    from modelplan.plan.parallel.tp import block_calls

    titan, megatron = load_engine("torchtitan"), load_engine("megatron")
    base = dict(global_batch=8, seq_len=128, precision="fp8")
    assert engine_settings(TrainingSpec(**base, framework="torchtitan", fp8_recipe="tensorwise"), titan).fp8_tp_gather
    assert not engine_settings(TrainingSpec(**base, framework="torchtitan", fp8_recipe="rowwise"), titan).fp8_tp_gather
    assert not engine_settings(TrainingSpec(**base, framework="megatron"), megatron).fp8_tp_gather
    assert not engine_settings(TrainingSpec(global_batch=8, seq_len=128, framework="torchtitan"), titan).fp8_tp_gather
    # one block, SP over tp 8, a (b, s, h) activation of 2 x 1024 x 4096 bf16 bytes, gathered as 1-byte fp8
    act = 2 * 1024 * 4096 * 2
    calls = RankCalls()
    block_calls(calls, 8, True, act, 1, 1, gather_bytes=act // 2)
    sizes: dict = {}
    for key, n in calls.counts.items():  # key: (op, axis, group, nbytes, region, ...)
        sizes[(key[0], key[3])] = sizes.get((key[0], key[3]), 0) + n
    # per sub-layer (attention, MLP): forward AG + RS, backward RS (of f) + AG (of g)
    assert sizes == {(Collective.ALL_GATHER, act // 2): 4, (Collective.REDUCE_SCATTER, act): 4}


def test_torchtitan_context_parallel_moves_k_v_at_the_query_heads():
    """torchtitan (before ff0829c10) repeats GQA's K, V to the query heads before SDPA, so the CP
    ring carries them at 32 heads for Llama 3 8B: b s/cp x 32 x 128 x 2 (K, V) x 2 bytes, where
    Megatron's carries the 8 KV heads (models/llama/model.py repeat_kv)."""
    from modelplan.plan.evaluator import Evaluator

    cluster = load_cluster("dgx-h100")
    tokens = 8192 // 2
    kv = {}
    for framework in ("torchtitan", "megatron"):
        ev = Evaluator(LLAMA, TrainingSpec(global_batch=8, seq_len=8192, framework=framework), cluster)
        kv[framework] = ev.cp_block_bytes(1, 1, 2)[0]
    assert kv["torchtitan"] == 2 * tokens * 32 * 128 * 2
    assert kv["megatron"] == 2 * tokens * 8 * 128 * 2
    assert load_engine("torchtitan").sdpa_repeats_kv
