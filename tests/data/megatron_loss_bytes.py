"""Run Megatron-core's unfused `_VocabParallelCrossEntropy` (tp 1) on bf16 logits under a
TorchDispatchMode and print the HBM bytes per logit its aten ops read and write, forward and
backward (`tests/test_loss_kernels.py` runs it in a subprocess: it initialises process groups).

Each op reads its logit-sized inputs once and writes its logit-sized outputs once (an in-place or
out= op reads and writes the same tensor); views and detach move nothing; `index` / `index_put_`
gather or scatter one value per row and are left out, as `count.loss_kernels` leaves them out.
"""

import os

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

ROWS, VOCAB = 12, 1000
N = ROWS * VOCAB
FREE = ("aten.view", "aten.detach", "aten.index.", "aten.index_put_", "aten._unsafe_view", "aten.alias")


class Bytes(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not str(func).startswith(FREE):
            def big(items):
                return {id(t.untyped_storage()): t for t in tree_flatten(items)[0]
                        if isinstance(t, torch.Tensor) and t.numel() == N}
            reads = big((args, {k: v for k, v in kwargs.items() if k != "out"}))
            writes = big(out)
            self.total += sum(t.element_size() * N for t in list(reads.values()) + list(writes.values()))
        return out


def main() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    from megatron.core import parallel_state
    parallel_state.initialize_model_parallel(1, 1)
    from megatron.core.tensor_parallel.cross_entropy import vocab_parallel_cross_entropy

    logits = torch.randn(ROWS // 3, 3, VOCAB, dtype=torch.bfloat16, requires_grad=True)  # [s, b, V/tp]
    target = torch.randint(0, VOCAB, (ROWS // 3, 3))
    with Bytes() as fwd:
        loss = vocab_parallel_cross_entropy(logits, target)
    with Bytes() as bwd:
        loss.sum().backward()
    print(fwd.total // N, bwd.total // N)


if __name__ == "__main__":
    main()
