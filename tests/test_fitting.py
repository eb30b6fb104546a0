"""fast.fitting: an entry point's default configuration steps down until the device's shared memory holds it."""

from typing import Any

import pytest
import torch
from triton.runtime.errors import OutOfResources

from fast import fitting
from fast.cache import attention, sparse_attention
from fast.indexing import logits

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _device(limit: int, need):
    """A launch that runs out of shared memory above ``limit`` bytes (``need(config)``), recording each try."""
    tried = []

    def launch(config) -> None:
        tried.append(config)
        if need(config) > limit:
            raise OutOfResources(need(config), limit, "shared memory")

    return tried, launch


def test_the_first_configuration_that_fits_is_launched_and_remembered() -> None:
    tried, launch = _device(100, lambda c: c)
    assert fitting.first_fitting([400, 200, 100, 50], launch, key="t1") == 100
    assert tried == [400, 200, 100]
    tried.clear()
    assert fitting.first_fitting([400, 200, 100, 50], launch, key="t1") == 100
    assert tried == [100]  # the remembered one is tried first


def test_nothing_fits_raises_the_last_error() -> None:
    tried, launch = _device(10, lambda c: c)
    with pytest.raises(OutOfResources, match="Required: 50"):
        fitting.first_fitting([400, 50], launch, key="t2")
    assert tried == [400, 50]
    with pytest.raises(ValueError, match=r"^configs:"):
        fitting.first_fitting([], launch, key="t3")


def test_other_errors_are_not_swallowed() -> None:
    def launch(config: int) -> None:
        raise RuntimeError("illegal memory access")

    with pytest.raises(RuntimeError, match="illegal"):
        fitting.first_fitting([1, 2], launch, key="t4")


def test_attention_fallbacks_take_one_stage_then_narrower_tiles() -> None:
    steps = attention._fallbacks(attention.Config(64, 64, 8, 2))
    assert [(c.block_h, c.block_n, c.num_stages) for c in steps] == [
        (64, 64, 2), (64, 64, 1), (64, 32, 1), (64, 16, 1), (32, 16, 1), (16, 16, 1)
    ]  # fmt: skip
    assert all(c.num_warps == 8 and c.native_fp8 for c in steps)


def test_logits_fallbacks_take_one_stage_then_narrower_tiles() -> None:
    steps = logits._fallbacks(logits.LogitsConfig(columns=256, block_k=64, num_stages=2))
    assert [(c.columns, c.block_k, c.num_stages) for c in steps] == [
        (256, 64, 2), (256, 64, 1), (256, 32, 1), (256, 16, 1), (128, 16, 1), (64, 16, 1)
    ]  # fmt: skip
    paged = logits._fallbacks(logits.LogitsConfig(columns=256, block_k=64, num_stages=2), paged=True)
    assert [(c.block_k, c.num_stages) for c in paged] == [(64, 2), (64, 1), (32, 1), (16, 1)]


class _FirstLaunchOverflows:
    """A Triton kernel whose first launch runs out of shared memory (as an oversized tile does on the GPU);
    ``launched`` keeps the compile-time options of every try."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.launched: list[dict[str, Any]] = []

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **options: Any) -> None:
            self.launched.append(options)
            if len(self.launched) == 1:
                raise OutOfResources(246016, 232448, "shared memory")
            self.kernel[grid](*args, **options)

        return launch


def _overflowing(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> _FirstLaunchOverflows:
    monkeypatch.setattr(fitting, "_FITTED", {})
    fake = _FirstLaunchOverflows(getattr(module, name))
    monkeypatch.setattr(module, name, fake)
    return fake


def test_sparse_attention_steps_down_when_its_tile_overflows(monkeypatch: pytest.MonkeyPatch) -> None:
    g = torch.Generator().manual_seed(0)
    q, kv = torch.randn(2, 4, 32, generator=g), torch.randn(40, 32, generator=g)
    indices = torch.randint(-1, 40, (2, 24), generator=g, dtype=torch.int32)
    q, kv, indices = (t.to(DEVICE) for t in (q, kv, indices))
    want = sparse_attention(q, kv, indices, None, scale=0.2, dv=32)
    fake = _overflowing(monkeypatch, attention, "_sparse_attention_kernel")
    got = sparse_attention(q, kv, indices, None, scale=0.2, dv=32)
    first, second = fake.launched
    assert (second["num_stages"], second["BLOCK_N"]) in ((1, first["BLOCK_N"]), (1, first["BLOCK_N"] // 2))
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_index_logits_step_down_when_their_tile_overflows(monkeypatch: pytest.MonkeyPatch) -> None:
    wide = logits.LogitsConfig(columns=32, block_k=32, split=32, num_warps=1, num_stages=1)
    monkeypatch.setattr(logits, "default_config", lambda *a, **kw: wide)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(3, 2, 16, generator=g).to(DEVICE, torch.bfloat16)
    w, k = torch.randn(3, 2, generator=g).to(DEVICE), torch.randn(20, 16, generator=g).to(DEVICE, torch.bfloat16)
    lengths = torch.tensor([20, 7, 0], device=DEVICE)
    want = logits.index_logits(q, w, k, lengths)
    fake = _overflowing(monkeypatch, logits, "_logits_kernel")
    got = logits.index_logits(q, w, k, lengths)
    first, second = fake.launched
    assert (first["BK"], second["BK"]) == (32, 16)
    assert torch.equal(got, want)

    cache = k.view(5, 4, 16)
    table = torch.tensor([[4, 3, 2, 1, 0]], dtype=torch.int32, device=DEVICE)
    paged_q, paged_w, paged_len = q[:2].unsqueeze(0), w[:2].unsqueeze(0), torch.tensor([[20, 9]], device=DEVICE)
    want = logits.paged_index_logits(paged_q, paged_w, cache, table, paged_len.int(), rows_per_block=4)
    fake = _overflowing(monkeypatch, logits, "_paged_logits_kernel")
    got = logits.paged_index_logits(paged_q, paged_w, cache, table, paged_len.int(), rows_per_block=4)
    first, second = fake.launched
    assert (first["BK"], second["BK"]) == (32, 16)
    assert torch.equal(got, want)


def test_an_explicit_configuration_is_not_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    q, kv = torch.zeros(1, 4, 32, device=DEVICE), torch.zeros(8, 32, device=DEVICE)
    indices = torch.zeros(1, 8, dtype=torch.int32, device=DEVICE)
    _overflowing(monkeypatch, attention, "_sparse_attention_kernel")
    with pytest.raises(OutOfResources):
        sparse_attention(q, kv, indices, None, scale=1.0, dv=32, config=attention.Config(16, 16, 4, 1))
