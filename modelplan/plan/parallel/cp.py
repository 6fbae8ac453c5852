"""Context parallelism: every rank holds s/cp tokens of each sequence, so every activation
message of the other parallelisms is b*(s/cp)*h; attention needs the other ranks' keys and
values, which each engine fetches its own way (`CpCommType`, per block and micro-batch, in the
compute dtype; `kv` = one rank's K, V block 2*b*(s/cp)*kv_heads/tp*head_dim values):

- 'p2p' (ring attention, Liu et al. 2023; Transformer Engine `AttnFuncWithCPAndKVP2P`, Megatron
  `--cp-comm-type p2p`, the default of Megatron-LM arguments.py): the K, V blocks travel the cp
  ring in cp - 1 send/recv steps in forward (again in the recompute forward) and in backward,
  where the dK, dV accumulators travel with them. Each step's send hides behind the attention on
  the block the rank holds (1/cp of the attention core; TE: 'P2P is async and can be overlapped
  with attention compute', transformer_config.py cp_comm_type).
- 'all_gather' (Llama 3, Dubey et al. 2024 sec. 3.3.2; TE `AttnFuncWithCPAndKVAllGather`,
  Megatron `--cp-comm-type all_gather`): an AllGather of K and V (cp * kv) before the local
  queries' attention, exposed ('The all-gather is not async, and cannot be overlapped',
  transformer_config.py); backward all-gathers K, V again and reduce-scatters the full-sequence
  dK, dV (cp * kv, compute dtype), exposed. The gathered K, V (and in backward dK, dV) of the
  whole sequence are held while the block's attention runs.
- 'a2a' (DeepSpeed-Ulysses, Jacobs et al. 2023, arXiv 2309.14509; TE `AttnFuncWithCPAndQKVOA2A`):
  an AllToAll of each of Q, K and V before attention (each rank then holds all s tokens of
  heads/cp heads) and of the output after; backward the same on dO and on each of dQ, dK, dV:
  one call per tensor (DeepSpeed `DistributedAttention` applies `_SeqAllToAll` to query, key and
  value in turn; TE's `flash_attn_a2a_communicate` issues one `all_to_all_single` per tensor),
  4 calls forward and 4 backward, (cp-1)/cp of each tensor leaving each rank. Nothing to
  overlap with (attention needs the whole exchange); heads and kv heads per TP rank must divide
  by cp.

PyTorch's context parallel (torchtitan; `EngineProfile.cp_fp32_merge`,
torch/distributed/tensor/experimental/_attention.py) runs a ring of cp steps either way:
rotate method 'alltoall' ('p2p' here: K, V permuted to the next rank each step) or 'allgather'
('all_gather' here, torch's and torchtitan's default: one AllGather of K, V issued before the
first step and waited at the second, so it hides behind one step, 1/cp of the core). Its
backward rotates K, V the same way and always passes the dK, dV accumulators round the ring
(`_templated_ring_attention_backward`: ALL_TO_ALL rotater, fp32 accumulators): cp sends of
2*kv*4/d bytes, each hidden behind the next step, the last one waited at once.

States it shards: none; gradients and ZeRO shards are reduced over dp x cp (`dp_zero.py`).
The hidden rest of the traffic costs `overlap_interference` of itself.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from modelplan.comm.ops import Axis, Collective
from modelplan.comm.regions import Region
from modelplan.plan.parallel.calls import RankCalls
from modelplan.specs.costmodel import CostModel

CpCommType = Literal["p2p", "all_gather", "a2a"]
"""How context-parallel attention exchanges keys and values (module docstring)."""
CP_COMM_TYPES: tuple[CpCommType, ...] = ("p2p", "all_gather", "a2a")
P2P = Collective.SEND_RECV
FP32_BYTES = 4  # PyTorch CP's dK, dV accumulators (_cp_options.convert_to_f32 True)


def kv_bytes(tokens: int, kv_heads_local: int, dim_head: int, act_bytes: int) -> int:
    """One K, V block of this rank's tokens: 2 * b*(s/cp) * kv_heads/tp * head_dim values."""
    return 2 * tokens * kv_heads_local * dim_head * act_bytes


def q_bytes(tokens: int, heads_local: int, dim_head: int, act_bytes: int) -> int:
    """This rank's queries (or attention output): b*(s/cp) * heads/tp * head_dim values."""
    return tokens * heads_local * dim_head * act_bytes


def dkv_bytes(kv: int, act_bytes: int, torch_cp: bool) -> int:
    """One dK, dV block: the K, V block's size, in fp32 under PyTorch's CP (its accumulators)."""
    return kv * FP32_BYTES // act_bytes if torch_cp else kv


def cp_problem(cp_comm_type: str, cp: int, heads_local: int, kv_heads_local: int, torch_cp: bool) -> str | None:
    """Why the engine would refuse this type at this cp (None: it runs)."""
    if cp == 1:
        return None
    if cp_comm_type == "a2a" and torch_cp:
        return "cp_comm_type 'a2a' (Ulysses): PyTorch's context parallel has only ring rotate methods " \
               "(allgather, alltoall: 'all_gather', 'p2p' here)"
    if cp_comm_type == "a2a" and (heads_local % cp or kv_heads_local % cp):
        # TE AttnFuncWithCPAndQKVOA2A: 'The number of attention heads needs to be divisible by CP size!'
        return (f"cp_comm_type 'a2a' needs cp ({cp}) to divide the heads ({heads_local}) and kv heads "
                f"({kv_heads_local}) per tensor-parallel rank (Ulysses splits heads over cp)")
    return None


def cp_calls(calls: RankCalls, cp: int, cp_comm_type: str, torch_cp: bool, kv: int, q: int, act_bytes: int,
             fwd_runs: int, bwd_runs: int, blocks: int) -> None:
    """Every context-parallel call of `blocks` blocks run forward `fwd_runs` (recompute included)
    and backward `bwd_runs` times (module docstring; AllGather / ReduceScatter sizes are the whole
    buffer, AllToAll the per-rank buffer, nccl-tests' convention)."""
    if cp == 1:
        return
    dkv = dkv_bytes(kv, act_bytes, torch_cp)
    if cp_comm_type == "a2a":  # one AllToAll per tensor (module docstring)
        for size, label in ((q, Region.CP_QKV), (kv // 2, Region.CP_QKV), (kv // 2, Region.CP_QKV),
                            (q, Region.CP_OUT)):
            calls.add(Collective.ALL_TO_ALL, Axis.CP, cp, size, fwd_runs * blocks, label)
        for size, label in ((q, Region.CP_OUT), (q, Region.CP_DKV), (kv // 2, Region.CP_DKV),
                            (kv // 2, Region.CP_DKV)):  # dO; dQ, dK, dV
            calls.add(Collective.ALL_TO_ALL, Axis.CP, cp, size, bwd_runs * blocks, label)
        return
    if cp_comm_type == "all_gather":
        calls.add(Collective.ALL_GATHER, Axis.CP, cp, cp * kv, (fwd_runs + bwd_runs) * blocks, Region.CP_KV)
        if not torch_cp:
            calls.add(Collective.REDUCE_SCATTER, Axis.CP, cp, cp * kv, bwd_runs * blocks, Region.CP_DKV)
    for role in ("send", "recv"):
        if cp_comm_type == "p2p":
            calls.add(P2P, Axis.CP, cp, kv, (fwd_runs + bwd_runs) * (cp - 1) * blocks, Region.CP_KV, role=role)
        if cp_comm_type == "p2p" or torch_cp:  # PyTorch: dK, dV go round the ring under either method
            calls.add(P2P, Axis.CP, cp, dkv, bwd_runs * (cp if torch_cp else cp - 1) * blocks, Region.CP_DKV,
                      role=role)


class CpSeconds(NamedTuple):
    """One call of each context-parallel transfer of one block (seconds)."""

    kv_send_s: float
    """One K, V block to the next ring rank."""
    dkv_send_s: float
    """One dK, dV block to the next ring rank (fp32 under PyTorch's CP)."""
    gather_s: float
    """AllGather of K, V over cp."""
    scatter_s: float
    """ReduceScatter of dK, dV over cp."""
    qkv_a2a_s: float
    """The AllToAlls of Q, of K and of V (equal to dQ's, dK's and dV's; `qkv_a2a_seconds`)."""
    out_a2a_s: float
    """AllToAll of the attention output (equal to dO's)."""


def cp_seconds(pricer, cp: int, kv: int, q: int, shape, act_bytes: int, torch_cp: bool) -> CpSeconds:
    """One call of each context-parallel transfer of one block (K, V block `kv`, queries `q` bytes)
    on the cp group's links (`shape`), priced by `pricer` (`plan/commcost.CommPricer`)."""
    dkv = dkv_bytes(kv, act_bytes, torch_cp)
    price = pricer.time_s
    return CpSeconds(
        kv_send_s=pricer.p2p_time_s(kv, shape.crosses_nodes),
        dkv_send_s=pricer.p2p_time_s(dkv, shape.crosses_nodes),
        gather_s=price(Collective.ALL_GATHER, cp * kv, shape),
        scatter_s=price(Collective.REDUCE_SCATTER, cp * kv, shape),
        qkv_a2a_s=qkv_a2a_seconds(price, q, kv, shape),
        out_a2a_s=price(Collective.ALL_TO_ALL, q, shape))


def qkv_a2a_seconds(price, q: int, kv: int, shape) -> float:
    """Seconds of Ulysses' three AllToAlls of Q, K and V (`cp_calls`), `price(op, bytes, shape)`."""
    return price(Collective.ALL_TO_ALL, q, shape) + 2 * price(Collective.ALL_TO_ALL, kv // 2, shape)


def ring_exposure(cp: int, kv_send_s: float, core_fwd_s: float, core_bwd_s: float) -> tuple[float, float, float]:
    """(forward exposed, backward exposed, hidden) seconds of one block's ring attention.

    Each of the cp - 1 ring steps sends one K, V block (forward) or K, V and dK, dV (backward) to
    the next rank while computing attention on the block it holds, 1/cp of the attention core
    (Liu et al. 2023, ring attention: 'overlapping the communication of key-value blocks with
    the computation of blockwise attention'); a step is exposed by what its send outlasts it."""
    steps = cp - 1
    fwd = steps * max(0.0, kv_send_s - core_fwd_s / cp)
    bwd = steps * max(0.0, 2 * kv_send_s - core_bwd_s / cp)
    return fwd, bwd, steps * 3 * kv_send_s - fwd - bwd


def _exposure(cp: int, cp_comm_type: str, torch_cp: bool, t: CpSeconds, core_fwd_s: float,
              core_bwd_s: float) -> tuple[float, float, float, float]:
    """(forward exposed, forward hidden, backward exposed, backward hidden) seconds of one block."""
    steps = cp - 1
    if cp_comm_type == "a2a":  # Ulysses: attention waits for the whole exchange
        return t.qkv_a2a_s + t.out_a2a_s, 0.0, t.qkv_a2a_s + t.out_a2a_s, 0.0
    if not torch_cp:
        if cp_comm_type == "all_gather":  # TE: 'KV all-gather between CP ranks is exposed'
            return t.gather_s, 0.0, t.gather_s + t.scatter_s, 0.0
        fwd, bwd, hidden = ring_exposure(cp, t.kv_send_s, core_fwd_s, core_bwd_s)
        return fwd, steps * t.kv_send_s - fwd, bwd, hidden - (steps * t.kv_send_s - fwd)
    step_f, step_b = core_fwd_s / cp, core_bwd_s / cp
    if cp_comm_type == "all_gather":  # issued before step 0, waited at step 1
        fwd = max(0.0, t.gather_s - step_f)
        kv_bwd = max(0.0, t.gather_s - step_b)
        kv_sent_f = kv_sent_b = t.gather_s
        dkv_bwd = steps * max(0.0, t.dkv_send_s - step_b)
    else:  # alltoall rotate: a permute per step, K, V and dK, dV behind the same step
        fwd = steps * max(0.0, t.kv_send_s - step_f)
        kv_sent_f = kv_sent_b = steps * t.kv_send_s
        kv_bwd = 0.0
        dkv_bwd = steps * max(0.0, t.kv_send_s + t.dkv_send_s - step_b)
    bwd = kv_bwd + dkv_bwd + t.dkv_send_s  # the last dK, dV exchange is waited at once
    sent_b = kv_sent_b + cp * t.dkv_send_s
    return fwd, kv_sent_f - fwd, bwd, sent_b - bwd


class CpExposure(NamedTuple):
    """Exposed context-parallel seconds of one block and micro-batch."""

    fwd_s: float
    bwd_s: float
    """Backward, plus the interference of the hidden traffic."""
    recompute_s: float
    """The recomputed forward exchanges K, V again (full recompute)."""
    hidden_s: float
    """Traffic hidden behind the attention core (for reference)."""


def cp_exposure(cp: int, cp_comm_type: str, torch_cp: bool, seconds: CpSeconds | None, core_fwd_s: float,
                core_bwd_s: float, full_recompute: bool, cost: CostModel) -> CpExposure:
    """Exposed seconds of one block under `cp_comm_type`, with the recompute forward's exchange
    and the interference of the hidden traffic."""
    if cp == 1:
        return CpExposure(0.0, 0.0, 0.0, 0.0)
    fwd, fwd_hidden, bwd, bwd_hidden = _exposure(cp, cp_comm_type, torch_cp, seconds, core_fwd_s, core_bwd_s)
    rec_f, rec_hidden = (fwd, fwd_hidden) if full_recompute else (0.0, 0.0)
    k = cost.overlap_interference
    return CpExposure(fwd, bwd + k * (fwd_hidden + bwd_hidden), rec_f + k * rec_hidden,
                      fwd_hidden + bwd_hidden + rec_hidden)


def working_bytes(cp: int, cp_comm_type: str, torch_cp: bool, kv: int, q: int, act_bytes: int) -> int:
    """Transient bytes the exchange adds while one block's attention runs (forward or backward,
    whichever is larger): ring send/receive buffers of one block each (p2p; fp32 dK, dV under
    PyTorch), the gathered K, V of the whole sequence (all_gather; TE's backward also holds the
    full-sequence dK, dV, `AttnFuncWithCPAndKVAllGather.backward`), the exchanged Q, K, V and
    output beside their inputs (a2a)."""
    if cp == 1:
        return 0
    dkv = dkv_bytes(kv, act_bytes, torch_cp)
    if cp_comm_type == "a2a":
        return q + kv + q
    if cp_comm_type == "all_gather":
        return cp * kv + (2 * dkv if torch_cp else cp * kv)
    return 2 * kv + 2 * dkv
