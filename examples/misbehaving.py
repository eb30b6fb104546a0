"""Kernels that misbehave in the ways ``csa fuzz`` must survive and report. Each computes the right V4.1 top-k
(``fast.indexing.naive``), or the right cache store, and then does one thing wrong:

    hangs                    never returns (waits on a lock nobody releases)
    segfaults                kills its own process with SIGSEGV on rows of length 0
    raises                   raises IndexError on rows of length 0
    zeroes_scores            zeroes its input ``scores`` after use
    zeroes_lengths           zeroes its input ``lengths`` after use
    shifts_offsets           adds 7 to its input ``offsets`` ("ready for the next step")
    clears_garbage           overwrites the garbage lanes past each row's length with -inf before ranking
    reads_far                a Triton kernel that loads 2**40 bytes past ``scores`` (a crash on a CPU, a CUDA
                             illegal memory access on a GPU)
    store_past_end           quantize_store whose Triton copy into ``cache`` writes one byte past its end

    csa fuzz --op topk --impl examples/misbehaving.py:hangs --timeout 2
    csa fuzz --op quantize_store --impl examples/misbehaving.py:store_past_end --convention v41_fp8_528
"""

import os
import signal
import threading

import torch
import triton
import triton.language as tl

from fast.cache import quantize_store
from fast.indexing import naive


def _topk(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, k: int) -> torch.Tensor:
    return naive.topk(scores, lengths, k=k, convention="v4.1", offsets=offsets)


def hangs(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # BUG: a deadlock
    return _topk(scores, lengths, offsets, k)


def segfaults(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    if bool((lengths == 0).any()):
        os.kill(os.getpid(), signal.SIGSEGV)  # BUG: an empty row dereferences a null pointer
    return _topk(scores, lengths, offsets, k)


def raises(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    newest = [scores[m, :n].tolist()[-1] for m, n in enumerate(lengths.tolist())]  # BUG: an empty row has none
    assert len(newest) == scores.shape[0]
    return _topk(scores, lengths, offsets, k)


def zeroes_scores(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    out = _topk(scores, lengths, offsets, k)
    scores.zero_()  # BUG: the logits buffer is an input
    return out


def zeroes_lengths(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    out = _topk(scores, lengths, offsets, k)
    lengths.zero_()  # BUG: an input
    return out


def shifts_offsets(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    out = _topk(scores, lengths, offsets, k)
    offsets.add_(7)  # BUG: "ready for the next step", but offsets is an input
    return out


def clears_garbage(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    lanes = torch.arange(scores.shape[1], device=scores.device)
    scores.masked_fill_(lanes[None, :] >= lengths[:, None], float("-inf"))  # BUG: garbage lanes are input too
    return _topk(scores, lengths, offsets, k)


@triton.jit
def _read_far(scores_ptr, out_ptr):
    far = scores_ptr + (1 << 38)  # 2**40 bytes of float32 past the start of scores
    tl.store(out_ptr, tl.load(far))


def reads_far(scores: torch.Tensor, lengths: torch.Tensor, offsets: torch.Tensor, *, k: int) -> torch.Tensor:
    sink = torch.empty(1, dtype=torch.float32, device=scores.device)
    _read_far[(1,)](scores, sink)  # BUG: an address computed with the wrong stride
    return _topk(scores, lengths, offsets, k)


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(src_ptr + offs, mask=offs < n, other=0)
    tl.store(dst_ptr + offs, values, mask=offs <= n)  # BUG: <= writes one byte past the end


def store_past_end(
    rows: torch.Tensor, slots: torch.Tensor, cache: torch.Tensor, *, fmt: str, rows_per_block: int, layer: int
) -> None:
    staged = cache.clone()
    quantize_store(rows, slots, staged, fmt=fmt, rows_per_block=rows_per_block, layer=layer, backend="torch")
    n = cache.numel()
    _copy[(triton.cdiv(n + 1, 1024),)](staged, cache, n, BLOCK=1024)


for _fn in (hangs, segfaults, raises, zeroes_scores, zeroes_lengths, shifts_offsets, clears_garbage, reads_far):
    _fn.csa_convention = "v4.1"  # type: ignore[attr-defined]
