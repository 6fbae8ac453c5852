"""The MPI backend: one process per rank, the simulator's algorithms over mpi4py messages.

`MPICommunicator` inherits every collective from `collectives.P2PCommunicator` and only moves
messages: non-blocking `Isend` (kept alive until complete, so a rank that sends first never
deadlocks with a peer that also sends first) and blocking `Recv` of raw bytes. The same call thus
sends the same messages in the same order as `SimCommunicator`, so ledgers are identical and
results bitwise equal.

Groups are tags, not sub-communicators: all traffic runs on one duplicate of COMM_WORLD and each
(group, channel) has its own tag, a CRC-32 of the group's axis and ranks. A sub-communicator
(`Create_group`) must be created by all its members together, so creating it on first use makes a
`send` wait for the peer to reach the group, which deadlocks programs the simulator runs (rank 0
sends on pp then all-reduces on world while rank 1 all-reduces first); tags keep `send`
non-blocking. Two groups with the same tag on one rank are reported, never mixed up.
When the receiver cannot know the shape (send/recv, all_to_all) the sender first posts a small
pickled `(dtype, shape)` header; headers are not payload and are not counted in the ledger (the
simulator has no headers either). A receiver that knows the shape checks the byte count, so a
dtype mismatch of equal size (float32[4] against float64[2]) is caught by the simulator only.

`run_spmd_mpi(world_size, fn, *args, timeout_s)` is the drop-in for `run_spmd` inside an mpiexec
job: launch with `mpiexec -n N python -m mpi4py -m modelplan ...`.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
import traceback
import zlib
from typing import Any, Callable, NoReturn

import numpy as np

from modelplan.comm.communicator import Group
from modelplan.errors import ModelplanError
from modelplan.execute.collectives import Channel, Like, P2PCommunicator
from modelplan.execute.mpilaunch import LAUNCHER_VAR, MPI_MISSING, unlink_own_segments
from modelplan.execute.spmd import CommError, SpmdError, SpmdResult, check_world_size

_CHANNEL_BIT = {Channel.COLL: 0, Channel.P2P: 1}
_ABORT_FAILED = 1
_ABORT_TIMEOUT = 124  # the exit status of coreutils timeout(1)
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def load_mpi() -> Any:
    """The mpi4py `MPI` module, or a one-line error saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise ModelplanError(MPI_MISSING) from None
    except RuntimeError as exc:
        raise ModelplanError(f"mpi4py cannot load its MPI library: {exc}") from None
    return MPI


class MPICommunicator(P2PCommunicator):
    """One rank's communicator in an MPI job (global rank = rank in `comm`, default COMM_WORLD)."""

    def __init__(self, comm: Any = None) -> None:
        self._MPI = load_mpi()
        world = comm if comm is not None else self._MPI.COMM_WORLD
        super().__init__(world.Get_rank(), world.Get_size())
        self._comm = world.Dup()  # collective over the world: keeps our tags off the caller's
        self._tag_span = (self._comm.Get_attr(self._MPI.TAG_UB) - 1) // 2
        self._tags: dict[Group, int] = {}
        self._groups_by_tag: dict[int, Group] = {}
        self._sends: list[tuple[Any, Any]] = []
        """(request, buffer) of the current collective's sends, completed at its end."""
        self._p2p_sends: list[tuple[Any, Any]] = []
        """Outstanding point-to-point sends, completed lazily."""
        self.waiting_for = ""
        """What this rank is blocked on right now (read by the timeout watchdog)."""

    def _tag(self, group: Group, channel: Channel) -> int:
        base = self._tags.get(group)
        if base is None:
            key = f"{group.axis}:{','.join(map(str, group.ranks))}".encode()
            base = 2 * (zlib.crc32(key) % self._tag_span)
            other = self._groups_by_tag.setdefault(base, group)
            if other != group:
                raise CommError(f"{group.axis} group {group.ranks} and {other.axis} group "
                                f"{other.ranks} hash to the same MPI tag ({base})")
            self._tags[group] = base
        return base + _CHANNEL_BIT[channel]

    def _begin(self, op: Any, group: Group) -> None:
        self._p2p_sends = [(req, buf) for req, buf in self._p2p_sends if not req.Test()]

    def _post(self, group: Group, peer: int, arr: np.ndarray, channel: Channel,
              with_shape: bool) -> None:
        tag, dst = self._tag(group, channel), group.ranks[peer]
        pending = self._sends if channel is Channel.COLL else self._p2p_sends
        if with_shape:
            pending.append((self._comm.isend((arr.dtype.str, arr.shape), dest=dst, tag=tag), None))
        pending.append((self._comm.Isend([arr, self._MPI.BYTE], dest=dst, tag=tag), arr))

    def _take(self, group: Group, peer: int, channel: Channel, like: Like) -> np.ndarray:
        MPI = self._MPI
        tag, src = self._tag(group, channel), group.ranks[peer]
        call = "recv" if channel is Channel.P2P else f"a message in {self._op}"
        self.waiting_for = f"{call} from rank {src} on {group.axis} group {group.ranks}" + (
            f" ({self.context})" if self.context else "")
        if like is None:
            dtype, shape = self._comm.recv(source=src, tag=tag)
            like = (tuple(shape), np.dtype(dtype))
        buf = np.empty(like[0], like[1])
        status = MPI.Status()
        expected = f"{buf.dtype}{list(buf.shape)} ({buf.nbytes} bytes)"
        try:
            self._comm.Recv([buf, MPI.BYTE], source=src, tag=tag, status=status)
        except MPI.Exception:
            raise CommError(f"{self._op} on {group.axis} group {group.ranks}: rank {src} sent "
                            f"more than the {expected} rank {self.rank} expects") from None
        if status.Get_count(MPI.BYTE) != buf.nbytes:
            raise CommError(f"{self._op} on {group.axis} group {group.ranks}: rank {src} sent "
                            f"{status.Get_count(MPI.BYTE)} bytes where rank {self.rank} expects "
                            f"{expected}")
        self.waiting_for = ""
        return buf

    def _complete(self) -> None:
        if self._sends:
            self._MPI.Request.Waitall([req for req, _ in self._sends])
            self._sends.clear()

    def finish(self) -> list[str]:
        """After the program returned on every rank: drain unreceived messages, free the comm.

        Collective over the world. Returns one line per (sender, group) whose messages this rank
        never received.
        """
        MPI = self._MPI
        self.waiting_for = "the other ranks to return from their program"
        self._comm.Barrier()
        counts: dict[tuple[int, int], int] = {}
        status = MPI.Status()
        while self._comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
            src, tag = status.Get_source(), status.Get_tag()
            self._comm.Recv([np.empty(status.Get_count(MPI.BYTE), np.uint8), MPI.BYTE],
                            source=src, tag=tag)
            counts[src, tag] = counts.get((src, tag), 0) + 1
        leftovers = []
        for (src, tag), count in sorted(counts.items()):
            p2p = tag % 2 == _CHANNEL_BIT[Channel.P2P]
            group = self._groups_by_tag.get(tag - tag % 2)
            where = f" on {group.axis} group {group.ranks}" if group else ""
            leftovers.append(f"rank {src} sent {count // 2 if p2p else count} message(s) to rank "
                             f"{self.rank} that were never received "
                             f"({'send/recv' if p2p else 'collectives'}{where})")
        MPI.Request.Waitall([req for req, _ in self._p2p_sends])
        self._p2p_sends.clear()
        self._comm.Free()
        self.waiting_for = ""
        return leftovers


def _abort(world: Any, message: str, status: int, detail: str = "") -> None:
    """Print the one-line reason (and a traceback for bugs), then end the whole job."""
    sys.stderr.write(f"error: {message}\n{detail}")
    sys.stderr.flush()
    time.sleep(0.2)  # let the other ranks' lines reach mpiexec before it kills them
    world.Abort(status)


class _Watchdog:
    """Ends this rank's program when it runs past `timeout_s` (one line naming what the rank
    waited for, then MPI_Abort of the job) or when a stop signal arrives.

    mpiexec stops the surviving ranks with SIGTERM when one rank dies, and Ctrl-C sends SIGINT.
    A rank blocked inside an MPI receive never returns to Python to run a signal handler, so the
    signal is taken from the wakeup file descriptor by this thread instead, which says so in one
    line (rank 0 only, and only when no modelplan launcher reports the end) and exits.
    """

    def __init__(self, comm: MPICommunicator, world: Any, timeout_s: float) -> None:
        self._comm, self._world, self._timeout_s = comm, world, timeout_s
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._old: dict[int, Any] = {}
        self._old_fd: int | None = None
        if threading.current_thread() is threading.main_thread():
            self._old_fd = signal.set_wakeup_fd(self._write)
            for sig in _STOP_SIGNALS:
                self._old[sig] = signal.signal(sig, lambda *_: None)  # the thread acts on it
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        deadline = time.monotonic() + self._timeout_s
        while True:
            ready, _, _ = select.select([self._read], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return self._expire()
            sig = os.read(self._read, 1)[0]
            if sig == 0:  # cancelled
                return None
            if sig in _STOP_SIGNALS:
                return self._stop(sig)

    def _expire(self) -> None:
        comm = self._comm
        what = (f"waiting for {comm.waiting_for}" if comm.waiting_for
                else "running outside the communicator")
        _abort(self._world, f"rank {comm.rank} timed out after {self._timeout_s:g} s, {what}",
               _ABORT_TIMEOUT)

    def _stop(self, sig: int) -> None:
        # the line first: mpiexec's teardown may SIGKILL this rank soon after its SIGTERM
        if self._comm.rank == 0 and LAUNCHER_VAR not in os.environ:
            sys.stderr.write(f"error: rank 0 stopped by {signal.Signals(sig).name}: the MPI job "
                             "is ending (a rank died, or mpiexec was interrupted or timed out)\n")
            sys.stderr.flush()
        unlink_own_segments()
        os._exit(128 + sig)

    def cancel(self) -> None:
        """Stop watching (the program returned or raised); restore the signal handlers."""
        os.write(self._write, b"\0")
        self._thread.join()
        if self._old_fd is not None:
            signal.set_wakeup_fd(self._old_fd)
            for sig, old in self._old.items():
                signal.signal(sig, old)
        os.close(self._read)
        os.close(self._write)


def run_spmd_mpi(world_size: int, fn: Callable[..., Any], *args: Any,
                 timeout_s: float = 60.0) -> SpmdResult | None:
    """Run `fn(comm, *args)` on this MPI process; rank 0 gets every rank's result and ledger.

    The drop-in for `run_spmd` under `mpiexec -n world_size python -m mpi4py ...`. A wrong world
    size raises the same one-line `SpmdError` on every rank. A rank that raises, or a run longer
    than `timeout_s`, prints one `error:` line naming the rank and aborts the whole job.
    Returns an `SpmdResult` on rank 0 and None on the other ranks.
    """
    MPI = load_mpi()
    check_world_size(world_size)
    if not timeout_s > 0:
        raise SpmdError(f"timeout_s ({timeout_s}) must be > 0")
    world = MPI.COMM_WORLD
    if world.Get_size() != world_size:
        raise SpmdError(f"world_size ({world_size}) must equal the number of MPI ranks "
                        f"({world.Get_size()}): launch with mpiexec -n {world_size}")
    comm = MPICommunicator(world)
    watchdog = _Watchdog(comm, world, timeout_s)
    try:
        result = fn(comm, *args)
        leftovers = comm.finish()
    except BaseException as exc:  # noqa: BLE001 - any failure ends the job, never a hang
        watchdog.cancel()
        detail = "" if isinstance(exc, ModelplanError) else traceback.format_exc()
        _abort(world, f"rank {comm.rank} failed: {type(exc).__name__}: {exc}", _ABORT_FAILED,
               detail)
        raise  # not reached: Abort ends the process
    watchdog.cancel()
    gathered = world.gather((result, comm.ledger, leftovers), root=0)
    if gathered is None:
        return None
    lines = [line for _, _, rank_lines in gathered for line in rank_lines]
    if lines:
        raise SpmdError("; ".join(lines))
    return SpmdResult(tuple(g[0] for g in gathered), tuple(g[1] for g in gathered))


def share_from_root(value: Any) -> Any:
    """Rank 0's `value` on every rank of COMM_WORLD (collective: every rank must call it)."""
    return load_mpi().COMM_WORLD.bcast(value, root=0)


def exit_rank(status: int) -> NoReturn:
    """End this rank with `status` as a normal exit, not MPI_Abort.

    `python -m mpi4py` turns a non-zero `sys.exit` into MPI_Abort, which makes mpiexec report an
    abort. Every rank of the job must call this with the same status: the barrier makes every rank
    finish printing before any of them exits, since mpiexec kills the others as soon as one rank
    ends with a non-zero status (a rank that exited first used to cut the others' lines).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.COMM_WORLD.Barrier()
        MPI.Finalize()
    os._exit(status)
