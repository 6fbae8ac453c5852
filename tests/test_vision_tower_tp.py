"""A vision tower under tensor parallelism, by engine (modelplan/plan/vision_tower_tp.py): Megatron-LM
splits its ViT blocks over tp (examples/multimodal/model.py deep-copies the language config;
vit_layer_specs.py column / row parallel linears), HF / FSDP / DeepSpeed replicate it. The tiny
LLaVA of tests/test_vision_tower.py: two CLIP blocks of h 64, 4 heads, MLP 96, 17 tokens an image
(16 patches + class). Expected values worked by hand."""

from __future__ import annotations

import pytest

from test_plan_cp import ideal_cluster
from test_vision_tower import LLAVA
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.shard import unit_shards
from modelplan.plan.vision_tower_tp import tower_activation_saving, tower_tp
from modelplan.specs.hf import from_hf_config
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

SPEC = from_hf_config(LLAVA)


def terms(framework: str, tp: int):
    training = TrainingSpec(global_batch=8, seq_len=64, framework=framework)
    return Evaluator(SPEC, training, ideal_cluster()).block_terms(tp, False, 1, "none")


def test_which_engines_split_the_tower():
    """Megatron splits over tp when tp divides the 4 heads and the MLP's 96; the others replicate;
    tp 8 does not divide 4 heads: priced whole (as Megatron's hf:// fallback runs it)."""
    assert tower_tp(SPEC, "megatron", 2) == 2 and tower_tp(SPEC, "megatron", 4) == 4
    assert tower_tp(SPEC, "megatron", 8) == 1
    assert {tower_tp(SPEC, fw, 2) for fw in ("fsdp", "deepspeed", "torchtitan")} == {1}


def test_megatron_holds_a_share_of_the_tower_blocks():
    """One CLIP block: qkv 3 x 64 x 64 + 192, out 4,096 + 64, fc1 64 x 96 + 96, fc2 6,144 + 64, two
    LayerNorms 256: 29,344. At tp 2 a rank holds qkv and fc1 (weights and biases) and the out / fc2
    weights halved, their biases and the norms whole: 6,240 + 2,048 + 64 + 3,120 + 3,072 + 64 + 256 =
    14,864; the tower unit (180,160 whole) loses 2 x 14,480 = 28,960."""
    whole = unit_shards(SPEC, Plan(tp=2), "fsdp")["vision"].numel
    assert whole == unit_shards(SPEC, Plan(tp=1), "megatron")["vision"].numel == 180_160
    assert unit_shards(SPEC, Plan(tp=2), "megatron")["vision"].numel == 180_160 - 28_960


def test_megatron_keeps_a_share_of_the_activations():
    """Per token of a block, Q, K, V, the out-projection input and the MLP's two inner tensors
    (2 bytes x (4 x 64 + 2 x 96)) and the fp32 log-sum-exp (4 x 4 heads): 912 bytes split over tp 2,
    the norms' 4h whole: one image saves 2 blocks x 17 tokens x 456 = 15,504 bytes."""
    assert tower_activation_saving(SPEC, 2, 1, 2) == 15_504
    assert terms("megatron", 1).embedding_activation_bytes - terms("megatron", 2).embedding_activation_bytes == 15_504
    assert terms("fsdp", 2).embedding_activation_bytes == terms("fsdp", 1).embedding_activation_bytes


def test_megatron_prices_the_split_tower_and_its_allreduces():
    """tp 2 under Megatron: the tower's kernels run at half the heads and MLP width (faster than
    whole, which FSDP still runs), plus per block four exposed AllReduces (f / g of attention and
    MLP, forward and backward) of 17 x 64 x 2 = 2,176 bytes: busbw factor 2(n-1)/n = 1 at n = 2
    (nccl-tests PERFORMANCE.md) over 100 GB/s: 21.76 ns each, 8 of them 174.08 ns."""
    mega, fsdp = terms("megatron", 2), terms("fsdp", 2)
    assert mega.kernels.embedding_fwd_s < fsdp.kernels.embedding_fwd_s == terms("fsdp", 1).kernels.embedding_fwd_s
    assert mega.tp.embedding_s - fsdp.tp.embedding_s == pytest.approx(8 * 2_176 / 100e9)
