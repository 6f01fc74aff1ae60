"""Running one step ahead of the host: the decode loop launches step k+1 before it reads step k's tokens, so the
device never waits while the host emits text, checks stop tokens and launches the next graph (on an H200 at the 8B
shape that wait was 0.43 ms of a 5.11 ms target-only step, 2026-11-28).

A step's outputs are graph buffers that its next replay overwrites, so what the host will read is first copied
out: :class:`HostCopy` queues a copy into pinned host memory on the device's stream right after the step (before
the next replay, so it holds this step's values) and reads it after an event, the step's one host
synchronisation. The next step needs nothing the host computes (its inputs are the last step's device outputs), so
the loop only has to decide whether to launch it before knowing this step's tokens: :func:`worth_running_ahead`
launches it when some sequence still needs a step after the one in flight whatever that step emits, so run-ahead
wastes no step except where a stop token ends a run early. Only a device that runs asynchronously gains from it
(:func:`runs_ahead`): on the CPU a step launched ahead is computed before the host reads the last one, so there it
would only add the dropped step's work.

What the host sends during the loop (the uniforms of a sampled step, the rows still active) goes through pinned
memory (:func:`to_device`): a copy from pageable memory may wait for the stream, which holds the step launched
ahead."""
from __future__ import annotations

import torch


class HostCopy:
    """``HostCopy(*rows)`` with [B, *] integer tensors: their values side by side, on their way to the host;
    :meth:`tolist` waits for them (the one host synchronisation) and returns [B] lists."""

    def __init__(self, *rows: torch.Tensor):
        flat = torch.cat([r.reshape(r.shape[0], -1) for r in rows], 1)   # a new tensor: no later step writes it
        self.event = None
        if flat.is_cuda:
            self.host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=True)
            self.host.copy_(flat, non_blocking=True)   # on flat's device's stream: the event goes there too (cuda:1
            self.event = torch.cuda.Event()            # while cuda:0 is current: an idle stream's event)
            self.event.record(torch.cuda.current_stream(flat.device))
        else:
            self.host = flat

    def wait(self) -> None:
        """Until the step and its copy are done (the host sync)."""
        if self.event is not None:
            self.event.synchronize()

    def tolist(self) -> list[list[int]]:
        self.wait()
        return self.host.tolist()


def runs_ahead(device: torch.device) -> bool:
    """Whether the loop launches a step before reading the last: where the device runs asynchronously (CUDA)."""
    return device.type == "cuda"


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device`` without waiting for the work queued there: through pinned memory on CUDA."""
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def worth_running_ahead(outs: list[list[int]], done: list[bool], max_new_tokens: int, most_per_step: int) -> bool:
    """Whether to launch the next step before reading the one in flight: some unfinished sequence (``outs`` the
    tokens emitted so far) will still need a step after it, even if that step emits ``most_per_step`` tokens."""
    return any(not d and len(out) + most_per_step < max_new_tokens for out, d in zip(outs, done))


class Reach:
    """A host-side bound on the pools' committed lengths for the step about to be launched, without a host read:
    the longest row the host last read (:meth:`seen`) plus ``per_step`` (the most a step commits) for each step
    launched since and not read yet. runners.KeySpans sizes the pools' key span from it (StaticKVPool.span)."""

    def __init__(self, longest: int, per_step: int):
        self.read, self.per_step, self.unread = longest, per_step, 0

    def bound(self) -> int:
        return self.read + self.per_step * self.unread

    def launched(self) -> None:
        self.unread += 1

    def seen(self, longest: int) -> None:
        """The lengths after the oldest unread step, read with its tokens."""
        self.read, self.unread = longest, self.unread - 1
