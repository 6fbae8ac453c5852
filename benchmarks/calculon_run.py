"""Run Calculon's own search (llm-optimal-execution) on a problem and write its best plans as JSON.

Calculon (github.com/calculon-ai/calculon, Apache-2.0) is not a dependency and none of its code
lives here: this driver imports a checkout given by --calculon and walks the same space as its
`llm-optimal-execution -m` command (calculon/llm/optimal_execution.py: tp, pp, dp, interleaving,
recompute, optimizer sharding, tensor-parallel comm type, seq-par AG redo, DP overlap, TP
overlap, weight / activation / optimizer offload, fused activation, micro-batch with its
`--mbs-break`, and a network per axis), pricing every execution with Calculon's own
Llm.compile/run. Two shortcuts leave the result unchanged and only save CPU:
- the logger is silenced (Calculon's search passes a NOTSET logger, so every debug line is
  formatted; that is 3/4 of its time per execution);
- executions that Calculon would reject before pricing (a network tier too small or not filled,
  offload with fewer than 3 blocks per processor) are counted as bad without being built.

    python benchmarks/calculon_run.py --calculon /path/to/calculon models/gpt3-13B.json 64 512 \
        systems/a100_80g.json benchmarks/calculon_13b_64.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time


def network_ok(syst, tp, pp, dp, tn, pn, dn) -> bool:
    """Calculon's rule (Llm._check_network_assignments): each used tier is big enough and,
    when it must be filled, its size is a multiple of the product of the axes placed on it."""
    size = [1] * syst.num_networks
    used = [False] * syst.num_networks
    for degree, net in ((tp, tn), (pp, pn), (dp, dn)):
        if degree > 1:
            used[net] = True
            size[net] *= degree
    for tier in range(syst.num_networks):
        if used[tier]:
            network = syst.get_network(tier)
            if size[tier] > network.size or (network.must_be_filled and network.size % size[tier]):
                return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calculon", required=True, help="path of a Calculon checkout")
    parser.add_argument("application")
    parser.add_argument("num_procs", type=int)
    parser.add_argument("max_batch_size", type=int)
    parser.add_argument("system")
    parser.add_argument("output")
    parser.add_argument("--top-n", type=int, default=5)
    parser.add_argument("--datatype", default="float16")
    parser.add_argument("--tp", type=int, nargs="*", help="only these tp (to split a run)")
    parser.add_argument("--price", help="JSON list of Calculon executions to price instead of searching "
                        "(num_procs, batch and datatype are filled in)")
    args = parser.parse_args()
    sys.path.insert(0, args.calculon)
    import calculon  # noqa: PLC0415  (a checkout given on the command line)
    from calculon.llm import Llm  # noqa: PLC0415
    from calculon.llm.optimal_execution import OptimalExecution  # noqa: PLC0415
    from calculon.system import System  # noqa: PLC0415
    from calculon.util import pick  # noqa: PLC0415

    commit = subprocess.run(["git", "-C", args.calculon, "rev-parse", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    app = Llm.Application(calculon.io.read_json_file(f"{args.calculon}/{args.application}"))
    syst = System(calculon.io.read_json_file(f"{args.calculon}/{args.system}"))
    quiet = logging.Logger("quiet", level=logging.CRITICAL)
    if args.price:
        return price(args, app, syst, quiet, Llm, commit)
    nets = range(syst.num_networks)
    has_mem2 = syst.mem2.capacity > 0
    best, counts = [], {"executions": 0, "good": 0, "bad": 0, "rejected_before_pricing": 0}
    start = time.process_time()
    for tp in Llm.get_all_tensor_parallelisms(args.num_procs, app.hidden, app.attn_heads):
        if args.tp and tp not in args.tp:
            continue
        for pp in Llm.get_all_pipeline_parallelisms(args.num_procs, tp, app.num_blocks):
            dp = Llm.get_data_parallelism(args.num_procs, tp, pp)
            blocks_per_proc = -(-app.num_blocks // pp)
            for ppint in Llm.get_valid_pipeline_interleavings(app.num_blocks, pp):
                batch = OptimalExecution.get_batch_size(dp, args.max_batch_size)
                if batch is None:
                    continue
                for recompute in ("full", "attn_only", "none"):
                    for sharding in pick(dp > 1, [True, False], [False]):
                        for comm in ("ar", "p2p_rs_ag", "rs_ag"):
                            # One OptimalExecution.search call: its own good counter drives -m.
                            good_here = 0
                            for redo in pick(Llm.can_redo_ag(comm, recompute), [True, False], [False]):
                                for dpo in pick(dp > 1, [True, False], [False]):
                                    for tpo in pick(tp > 1, ["none", "ring", "pipe"], ["none"]):
                                        for w_off in pick(has_mem2, [True, False], [False]):
                                            a_offs = [False] if recompute == "full" or not has_mem2 else [True, False]
                                            for a_off in a_offs:
                                                for o_off in pick(has_mem2, [True, False], [False]):
                                                    offload = w_off or a_off or o_off
                                                    for mbs in Llm.get_valid_microbatch_sizes(app.seq_size, tp, dp, batch, pp):
                                                        before = good_here
                                                        for tn in pick(tp > 1, nets, [0]):
                                                            for pn in pick(pp > 1, nets, [0]):
                                                                for dn in pick(dp > 1, nets, [0]):
                                                                    counts["executions"] += 1
                                                                    if not network_ok(syst, tp, pp, dp, tn, pn, dn) or (
                                                                            offload and blocks_per_proc <= 2):
                                                                        counts["bad"] += 1
                                                                        counts["rejected_before_pricing"] += 1
                                                                        continue
                                                                    exe = {
                                                                        "num_procs": args.num_procs, "tensor_par": tp,
                                                                        "pipeline_par": pp, "data_par": dp,
                                                                        "tensor_par_net": tn, "pipeline_par_net": pn,
                                                                        "data_par_net": dn, "batch_size": batch,
                                                                        "microbatch_size": mbs, "datatype": args.datatype,
                                                                        "fused_activation": True,
                                                                        "attention_type": "multihead",
                                                                        "activation_recompute": recompute,
                                                                        "pipeline_interleaving": ppint,
                                                                        "optimizer_sharding": sharding,
                                                                        "tensor_par_comm_type": comm,
                                                                        "tensor_par_overlap": tpo,
                                                                        "seq_par_ag_redo": redo,
                                                                        "data_par_overlap": dpo,
                                                                        "weight_offload": w_off,
                                                                        "activations_offload": a_off,
                                                                        "optimizer_offload": o_off,
                                                                        "training": True,
                                                                    }
                                                                    try:
                                                                        model = Llm(app, quiet)
                                                                        model.compile(syst, Llm.Execution.from_json(exe))
                                                                        model.run(syst)
                                                                    except Llm.Error:
                                                                        counts["bad"] += 1
                                                                        continue
                                                                    stats = model.get_stats_json(False)
                                                                    counts["good"] += 1
                                                                    good_here += 1
                                                                    best.append((stats["sample_rate"], exe, stats))
                                                                    best = sorted(best, key=lambda r: -r[0])[:args.top_n]
                                                                    if counts["good"] % 20000 == 0:  # a long run keeps its best so far
                                                                        write(args, commit, counts, start, best, partial=True)
                                                        if good_here == before:
                                                            break  # --mbs-break: a larger micro-batch will not fit either
        print(f"tp {tp} done: {counts} after {time.process_time() - start:.0f} s CPU", file=sys.stderr, flush=True)
    write(args, commit, counts, start, best, partial=False)
    print(f"best sample rate {best[0][0]:.3f} /s: {best[0][1]}" if best else "no plan")
    return 0


def write(args, commit: str, counts: dict, start: float, best: list, partial: bool) -> None:
    """The search's counts and best executions as JSON (atomic)."""
    out = {"calculon_commit": commit, "application": args.application, "system": args.system,
           "num_procs": args.num_procs, "max_batch_size": args.max_batch_size, "datatype": args.datatype,
           "search": "llm-optimal-execution -m (fused_activation true, tp and dp overlap allowed)"
                     + (f", tp restricted to {args.tp}" if args.tp else ""),
           "partial": partial, "counts": dict(counts), "cpu_s": round(time.process_time() - start, 1),
           "best": [{"sample_rate": r, "execution": e, "stats": s} for r, e, s in best]}
    with open(args.output + ".tmp", "w") as fh:
        json.dump(out, fh, indent=1)
    os.replace(args.output + ".tmp", args.output)


def price(args, app, syst, quiet, Llm, commit) -> int:  # noqa: N803 - Calculon's class
    """Price given executions with Calculon's model; write their stats (or the error) as JSON."""
    with open(args.price) as fh:
        executions = json.load(fh)
    rows = []
    for exe in executions:
        exe = {"num_procs": args.num_procs, "datatype": args.datatype, "fused_activation": True,
               "attention_type": "multihead", "training": True, **exe}
        try:
            model = Llm(app, quiet)
            model.compile(syst, Llm.Execution.from_json(exe))
            model.run(syst)
            rows.append({"execution": exe, "stats": model.get_stats_json(False)})
        except Llm.Error as exc:
            rows.append({"execution": exe, "error": str(exc)})
    out = {"calculon_commit": commit, "application": args.application, "system": args.system, "priced": rows}
    with open(args.output + ".tmp", "w") as fh:
        json.dump(out, fh, indent=1)
    os.replace(args.output + ".tmp", args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
