"""The command line that starts an export on a cluster: torchrun (or DeepSpeed's launcher) on
every node, or a SLURM sbatch script that runs it through srun.

torchrun flags are torch 2.13's `torch.distributed.run` options (--nnodes, --nproc-per-node,
--rdzv-backend c10d, --rdzv-endpoint, --rdzv-id); the deepspeed launcher's are DeepSpeed
0.19.8's `deepspeed/launcher/runner.py` (--num_nodes, --num_gpus, --hostfile, --master_addr,
--master_port). Under SLURM one task per node runs torchrun (the pattern of torchtitan's
multinode_trainer.slurm), so every engine launches the same way there.
"""

from __future__ import annotations

import shlex
from typing import Literal

from modelplan.errors import ModelplanError
from modelplan.export.result import Engine, EngineExport, LaunchCommand

Emit = Literal["shell", "slurm"]
RDZV_PORT = 29500


def check_geometry(world_size: int, nodes: int, gpus_per_node: int) -> None:
    """nodes x gpus_per_node must be the plan's world size (every rank one GPU)."""
    if nodes < 1 or gpus_per_node < 1:
        raise ModelplanError(f"--nodes ({nodes}) and --gpus-per-node ({gpus_per_node}) must be >= 1")
    if nodes * gpus_per_node != world_size:
        raise ModelplanError(
            f"--nodes ({nodes}) x --gpus-per-node ({gpus_per_node}) = {nodes * gpus_per_node} "
            f"GPUs, but the plan needs {world_size} (dp * tp * pp * cp)"
        )


def _env_lines(launch: LaunchCommand) -> list[str]:
    return [f"export {k}={shlex.quote(v)}" if v is not None else f"unset {k}"
            for k, v in launch.env]


def _program(launch: LaunchCommand) -> str:
    return " ".join(shlex.quote(arg) for arg in launch.program)


def torchrun_line(launch: LaunchCommand, nodes: int, gpus_per_node: int,
                  endpoint: str, rdzv_id: str) -> str:
    """One torchrun invocation for every node (c10d rendezvous at `endpoint`)."""
    head = f"torchrun --nnodes {nodes} --nproc-per-node {gpus_per_node}"
    if nodes > 1:
        head += f" --rdzv-backend c10d --rdzv-endpoint {endpoint} --rdzv-id {rdzv_id}"
    return f"{head} {_program(launch)}"


def deepspeed_line(launch: LaunchCommand, nodes: int, gpus_per_node: int) -> str:
    """DeepSpeed's own launcher (pdsh over a hostfile when there is more than one node)."""
    head = f"deepspeed --num_nodes {nodes} --num_gpus {gpus_per_node}"
    if nodes > 1:
        head += (' --hostfile "${HOSTFILE:-hostfile}" --master_addr "${MASTER_ADDR:?set '
                 'MASTER_ADDR}" --master_port "${MASTER_PORT:-29500}"')
    return f"{head} {_program(launch)}"


def launch_text(export: EngineExport, world_size: int, nodes: int, gpus_per_node: int,
                emit: Emit = "shell", job_name: str = "modelplan") -> str:
    """The commands (emit 'shell') or sbatch script (emit 'slurm') that launch `export`."""
    check_geometry(world_size, nodes, gpus_per_node)
    if export.launch is None:
        raise ModelplanError(f"--to {export.engine.value}: this export has no launch command")
    launch = export.launch
    files = [f"# needs {name}: modelplan export PLAN.json --to {export.engine.value} -o {name}"
             for name in launch.files]
    if emit == "slurm":
        lines = [
            "#!/bin/bash",
            f"#SBATCH --job-name={job_name}",
            f"#SBATCH --nodes={nodes}",
            "#SBATCH --ntasks-per-node=1",
            f"#SBATCH --gpus-per-node={gpus_per_node}",
            "#SBATCH --exclusive",
            f"# {export.engine.value} {export.engine_version or ''}: one torchrun per node "
            f"starts {gpus_per_node} ranks; {world_size} ranks in all.",
            *files,
            "set -euo pipefail",
            *_env_lines(launch),
            'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "srun " + torchrun_line(launch, nodes, gpus_per_node,
                                    f'"$MASTER_ADDR:{RDZV_PORT}"', '"$SLURM_JOB_ID"'),
        ]
        return "\n".join(lines) + "\n"
    if export.engine is Engine.deepspeed:
        command = deepspeed_line(launch, nodes, gpus_per_node)
        where = "once, on the first node (it starts every node over the hostfile)"
    else:
        endpoint = f'"${{MASTER_ADDR:?set MASTER_ADDR}}:${{MASTER_PORT:-{RDZV_PORT}}}"'
        command = torchrun_line(launch, nodes, gpus_per_node, endpoint, f'"${{JOB_ID:-{job_name}}}"')
        where = "on every node" if nodes > 1 else "on the node"
    lines = [f"# {export.engine.value} {export.engine_version or ''}: {world_size} ranks on "
             f"{nodes} node(s) x {gpus_per_node} GPUs; run {where}.", *files,
             *_env_lines(launch), command]
    return "\n".join(lines) + "\n"
