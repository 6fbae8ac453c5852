"""What apex's DistributedFusedAdam holds as NeMo 1.11 runs it (megatron_amp_O2, bf16, no PP), read
as Megatron zero 1 with fp32 gradients: bf16 weights, one whole fp32 gradient buffer, fp32 master
weights and Adam moments sharded over data parallel; and what NeMo 1.11's GPT layers save.

Sources (hand counts below):
- NeMo v1.11.0 (e856e973) megatron_gpt_model.py:180-184 `setup_optimization` passes
  `param_sync_dtype = autocast_dtype` and `contiguous_grad_buffer = True`, no `dtype` and no
  `grad_sync_dtype`; megatron_base_model.py:286-287: no MainParamsOptimizerWrapper with it.
- apex 3c19f106 (the commit NeMo v1.11.0's Dockerfile pins) distributed_fused_adam.py:
  `grad_sync_dtype = dtype` when None (fp32 default, l.212-213); buckets of 100 MB / 4 B =
  26,214,400 elements, shards of 26,214,400 / dp (l.280-287); `_grad_buffer = torch.zeros(
  [round_up(sum(numel), bucket_size)], dtype=self.dtype)` allocated once at construction (l.370-379),
  whole, never freed by `no_sync`; `_grad_copy` ends `param.grad = None` (l.562); `StateBucket`
  holds `params_shard`, `exp_avg_shard`, `exp_avg_sq_shard` of `shard_size` in fp32 (l.137-147),
  one per bucket. The same at a091a3c8 (2022-09-14, l.206-237, 306, 497-501, 700).
- GPT-3 5B: h 4096, 24 layers, 32 heads, seq 2048, vocab 50257 padded to 50304 (128 x tp),
  tied embeddings, learned positions (NeMo-Framework-Launcher 3579cdb3 conf/training/gpt3/5b.yaml).
"""

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.plan.estimate import estimate_split
from modelplan.specs.load import model_from_dict
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

H, LAYERS, HEADS, SEQ, MBS, DP, VOCAB_PADDED = 4096, 24, 32, 2048, 2, 8, 50304
# GPT-3 layer with biases: 12 h^2 + 13 h (QKV 3h^2+3h, proj h^2+h, fc1 4h^2+4h, fc2 4h^2+h, 2 LN 4h)
PARAMS = VOCAB_PADDED * H + SEQ * H + LAYERS * (12 * H * H + 13 * H) + 2 * H  # 5,047,558,144
BUCKET = 100 * 1024 * 1024 // 4  # apex: bucket_cap_mb 100 in fp32 elements
SHARD = BUCKET // DP
BUCKETS = -(-PARAMS // BUCKET)  # 193 (alignment padding of 32 elements per tensor is < 0.01 %)


@pytest.fixture(scope="module")
def stage():
    spec = model_from_dict(dict(
        name="GPT-3 5B (NeMo Megatron)", layers=LAYERS, hidden=H, heads=HEADS, ffn_hidden=4 * H, vocab=50257,
        max_positions=SEQ, position="learned", norm="layernorm", norm_bias=True, qkv_bias=True,
        attn_out_bias=True, mlp_bias=True, gated_mlp=False, activation="gelu", tied_embeddings=True,
        dropout=True), "nemo 5b")
    training = TrainingSpec(global_batch=2048, seq_len=SEQ, precision="bf16", optimizer="adamw",
                            recompute="none", attention="eager", framework="megatron", loss_kernel="megatron")
    plan = Plan(dp=DP, tp=1, pp=1, micro_batch=MBS, zero=1, recompute="none")
    return estimate_split(spec, training, plan, load_cluster("dgx-a100"), world_size=DP).memory[0]


def test_gradients_are_one_whole_fp32_buffer(stage):
    """apex's contiguous grad buffer: fp32 (optimizer dtype), every parameter, every rank: 193 x 26,214,400 x 4 B."""
    assert stage.gradients == pytest.approx(BUCKETS * BUCKET * 4, rel=5e-3)  # 20,237,516,800 B


def test_master_weights_and_moments_are_fp32_shards(stage):
    """StateBucket: params, exp_avg, exp_avg_sq shards in fp32: 193 x (26,214,400 / 8) x 12 B."""
    assert stage.optimizer == pytest.approx(BUCKETS * SHARD * 12, rel=5e-3)  # 7,589,068,800 B


def test_weights_are_bf16_whole(stage):
    """Float16Module's bf16 parameters, not sharded (ZeRO-1/2 keep the whole model): 2 B a parameter."""
    assert stage.weights == pytest.approx(PARAMS * 2, rel=5e-3)  # 10,095,116,288 B


def test_activations_are_what_the_layers_save(stage):
    """Per layer 34 sbh + 5 a s^2 b bytes (Korthikanti et al. 2022 eq. 1; each term checked in NeMo
    1.11 transformer.py: fused scale-mask softmax saves its bf16 output, nn.Dropout its 1-byte mask,
    the PV bmm the dropped bf16 probabilities); at the first backward the output layer adds the
    fp32 softmax of vocab_parallel_cross_entropy (s b V x 4), the bf16 logits gradient (s b V x 2)
    and 5 sbh (embedding dropout mask, final LN input, logits GEMM input)."""
    sbh = SEQ * MBS * H
    per_layer = 34 * sbh + 5 * HEADS * SEQ * SEQ * MBS
    logits = SEQ * MBS * VOCAB_PADDED
    assert stage.activations == pytest.approx(LAYERS * per_layer + 6 * logits + 5 * sbh, rel=5e-3)  # 47,222,620,160 B
