"""The one tensor-parallel KV-head rule (modelplan.specs.tp_kv_heads), shared by plan and serve."""

from __future__ import annotations

from modelplan.count.serve import default_serving_tp, local_kv_fraction
from modelplan.plan.validate import Reason, plan_notes, tp_problems
from modelplan.specs.blocks import MLASpec
from modelplan.specs.plan import Plan
from modelplan.specs.tp_kv_heads import attention_kv_heads, kv_heads_replicas, tp_fits_kv_heads
from modelplan.specs.transformer import TransformerSpec


def spec(heads: int = 12, kv_heads: int | None = 6, mla: bool = False) -> TransformerSpec:
    """768 wide, ffn 3072 (divisible by 1..12's divisors used here); MLA shaped like DeepSeek-V2-Lite
    (kv_lora_rank 512, nope 128, rope 64, v 128)."""
    latent = MLASpec(kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128) if mla else None
    return TransformerSpec(layers=2, hidden=768, heads=heads, kv_heads=kv_heads, ffn_hidden=3072, vocab=1000,
                           mla=latent)


def test_gqa_divides_or_replicates():
    """6 KV heads: tp 2, 3, 6 divide them, tp 12 replicates each on 2 ranks; tp 4 does neither
    (6 % 4 = 2, 4 % 6 = 4), worked by hand."""
    assert [tp for tp in (1, 2, 3, 4, 6, 12) if tp_fits_kv_heads(spec(), tp)] == [1, 2, 3, 6, 12]
    assert kv_heads_replicas(spec(), 12) == 2 and kv_heads_replicas(spec(), 6) == 1


def test_mqa_fits_every_tp():
    """One KV head (MQA): every tp is a multiple of 1, the head replicated on all tp ranks."""
    assert all(tp_fits_kv_heads(spec(kv_heads=1), tp) for tp in (1, 2, 3, 4, 6, 12))
    assert kv_heads_replicas(spec(kv_heads=1), 4) == 4


def test_mla_has_no_kv_heads_to_divide():
    """MLA with a config's num_key_value_heads of 6 and tp 4: the latent is held whole and K, V are
    up-projected per query head (DeepSeek-V2 sec. 2.1.2), so no KV-head problem and no replication
    note; the core reads 12 K/V heads (the query heads)."""
    mla = spec(kv_heads=6, mla=True)
    assert tp_fits_kv_heads(mla, 4)
    assert Reason.TP_KV_HEADS not in {p.reason for p in tp_problems(mla, 4)}
    assert not any("replicated" in n for n in plan_notes(mla, Plan(tp=12)))
    assert attention_kv_heads(mla) == 12 and kv_heads_replicas(mla, 12) == 1


def test_plan_and_serve_agree():
    """The planner refuses tp 4 for 6 KV heads with the same message serve raises."""
    gqa = spec()
    message = next(p.message for p in tp_problems(gqa, 4) if p.reason is Reason.TP_KV_HEADS)
    try:
        local_kv_fraction(gqa, 4)
    except Exception as exc:  # SpecError
        assert str(exc) == message == "tp (4) must divide kv_heads (6) or be a multiple of it (KV heads replicated)"
    else:
        raise AssertionError("serve accepted tp 4 for 6 KV heads")
    assert default_serving_tp(spec(heads=12, kv_heads=6, mla=True), 4, 8) == 4  # MLA: heads 12 % 4 only
    assert default_serving_tp(gqa, 4, 8) == 2  # 4 GPUs: tp 4 does not fit 6 KV heads, 3 does not divide 4 GPUs


def test_verify_does_not_divide_mla_kv_heads():
    """verify's executor splits K, V heads exactly (no replication): a GQA model of 2 heads and 1 KV
    head is refused at tp 2, but the same shape with MLA (K, V per query head from kv_b) runs."""
    import pytest

    from modelplan.errors import SpecError
    from modelplan.execute.scale import check_plan
    from modelplan.specs.training import TrainingSpec

    latent = MLASpec(kv_lora_rank=4, q_lora_rank=3, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2)
    gqa = TransformerSpec(layers=2, hidden=8, heads=2, kv_heads=1, ffn_hidden=12, vocab=11)
    training, plan = TrainingSpec(global_batch=4, seq_len=8), Plan(tp=2, dp=1, micro_batch=1)
    with pytest.raises(SpecError, match=r"tp \(2\) must divide kv_heads \(1\)"):
        check_plan(gqa, training, plan)
    assert check_plan(gqa.model_copy(update={"mla": latent}), training, plan) == 4  # 4 micro-batches
