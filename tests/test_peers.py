"""csa/peers: the engines' kernels load from their unpacked wheels and are judged end to end by csa fuzz.

Every test skips, naming the reason, where ``make peers`` has not unpacked the pinned wheels (or the
machine lacks torch / Triton); what does not need the wheels (the catalog, the loader's stubs) always runs.
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from csa.peers import catalog, loader

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _needs(package: str) -> None:
    reason = loader.missing_reason(loader.ENGINES[package])
    if reason:
        pytest.skip(reason)
    for module in ("torch", "triton"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the peers extra)")


def test_every_peer_names_an_adapter_of_its_operation() -> None:
    from properties.contract import OPERATIONS

    assert len(catalog.PEERS) >= 12
    for peer in catalog.PEERS:
        assert peer.op in OPERATIONS, peer.name
        assert peer.expect in ("pass", "fail"), peer.name
        module, _, attr = peer.impl.partition(":")
        assert module in ("csa.peers.vllm_ops", "csa.peers.sglang_ops"), peer.name
        assert attr, peer.name


def test_stubs_are_inert_and_distinct() -> None:
    stub = loader._StubModule("somepackage")
    a, b = stub.Alpha, stub.Beta
    assert a is not b and a is stub.Alpha
    assert a.Gamma is not b.Gamma

    class Sub(a):  # type: ignore[misc, valid-type]
        pass

    assert isinstance(Sub(1, x=2), a)
    assert a(len) is len  # a stub called as a decorator returns what it decorates
    assert (a | None) is a and a[int] is a


def test_stubbed_engine_modules_cover_their_submodules_only() -> None:
    stubbed = ("sglang.srt.configs", "sglang.srt.layers.linear")
    assert loader._under("sglang.srt.configs", stubbed) and loader._under("sglang.srt.configs.deepseek_v4", stubbed)
    assert not loader._under("sglang.srt.layers.linear_utils", stubbed) and not loader._under("sglang.srt", stubbed)


@pytest.mark.parametrize("package", sorted(loader.ENGINES))
def test_missing_wheels_are_named(package: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CSA_PEERS_DIR", str(tmp_path))
    engine = loader.ENGINES[package]
    reason = loader.missing_reason(engine)
    assert reason is not None and f"{package} {engine.version} is not unpacked" in reason
    with pytest.raises(loader.PeerMissing, match="make peers"):
        loader.load(package, f"{package}.version")


def _peer(name: str) -> catalog.Peer:
    return next(p for p in catalog.PEERS if p.name == name)


def _run_in_subprocess(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
def test_adapters_load() -> None:
    _needs("vllm")
    _needs("sglang")
    out = _run_in_subprocess(
        "from csa.peers import vllm_ops, sglang_ops\n"
        "for n in (vllm_ops.V4_CACHE, vllm_ops.V41_CACHE, vllm_ops.CANDIDATES, vllm_ops.SPARSE_LOGITS,\n"
        "          vllm_ops.V4_COMPRESS, vllm_ops.V41_COMPRESS):\n"
        "    print(vllm_ops.module(n).__file__)\n"
        "for n in (sglang_ops.CANDIDATES, sglang_ops.DEQUANT, sglang_ops.INDEX_CACHE, sglang_ops.INDEXER):\n"
        "    print(sglang_ops.module(n).__file__)\n"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    files = out.stdout.split()
    assert len(files) == 10
    assert all(str(loader.peers_dir()) in f for f in files)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "convention"),
    [
        ("vllm.compute_global_topk_indices_and_lens", "sentinel+int32_slots"),
        ("vllm.fused_save_compress_norm + rope_quant_insert (V4.1, 528 B), compress ratio 1", "v41_fp8_528"),
    ],
)
def test_a_peer_judged_end_to_end(name: str, convention: str, tmp_path: pathlib.Path) -> None:
    """vLLM's slot translation and its V4.1 compressor tail, each under its declared convention, through csa
    fuzz's worker: they pass."""
    _needs("vllm")
    peer = _peer(name)
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "csa.cli", "fuzz", "--op", peer.op, "--impl", peer.impl, "--max-examples", "5"]
    cmd += ["--shrink-seconds", "5", "--report", str(report), "--repro-dir", str(tmp_path / "repro")]
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    data = json.loads(report.read_text())
    assert data["convention"] == convention
    assert data["result"] == "pass"


@pytest.mark.slow
def test_vllm_remap_agrees_inside_its_domain_and_refuses_outside_it() -> None:
    """vLLM's candidate remap equals the reference on block sizes 8, 16 and 32 (its two-sparse-blocks path) and
    refuses a block size that is no multiple of its sparse block: the domain its verdict states."""
    _needs("vllm")
    out = _run_in_subprocess(
        "import torch\n"
        "from csa.peers.vllm_ops import sparse_topk_remap\n"
        "from reference.candidates import remap_columns\n"
        "blocks, lengths = [[5, -1, 0, 2], [1, 3, -1, -1]], [170, 70]\n"
        "for size in (8, 16, 32):\n"
        "    columns = [[0, 1, -1, 2 * size - 1, 2 * size], [1, -1, 0, 0, 1]]\n"
        "    args = [torch.tensor(v, dtype=torch.int32) for v in (columns, blocks, lengths)]\n"
        "    got, counts = sparse_topk_remap(*args, block_size=size)\n"
        "    want = [remap_columns(c, b, n, size) for c, b, n in zip(columns, blocks, lengths)]\n"
        "    assert got.tolist() == [list(p) for p, _ in want], (size, got.tolist(), want)\n"
        "    assert counts.tolist() == [n for _, n in want], (size, counts.tolist(), want)\n"
        "try:\n"
        "    sparse_topk_remap(*args, block_size=4)\n"
        "except ValueError as err:\n"
        "    print('refused:', err)\n"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "refused: candidate_block_size=4" in out.stdout


@pytest.mark.slow
def test_sglang_topk_transform_agrees_on_finite_prefixes_and_shows_its_verdicts_cases() -> None:
    """SGLang's topk_transform_pytorch_vectorized chooses the reference's rows when every valid score is finite
    (distinct scores, garbage past each length, lengths above and below k); and shows the two cases its verdict
    names: a -inf row of the prefix dropped only when the length exceeds k, and a lane past the length."""
    _needs("sglang")
    out = _run_in_subprocess(
        "import random, torch\n"
        "from csa.peers.sglang_ops import topk_transform\n"
        "from reference.topk import V41TopK, Width, topk\n"
        "inf, rng = float('inf'), random.Random(0)\n"
        "for _ in range(200):\n"
        "    m, n, k = rng.randint(1, 4), rng.randint(1, 24), rng.randint(1, 12)\n"
        "    lengths = [rng.randint(-1, n) for _ in range(m)]\n"
        "    rows = [rng.sample(range(-50, 50), n) for _ in range(m)]\n"
        "    for r, n_ in zip(rows, lengths):\n"
        "        r[max(n_, 0):] = [rng.choice([float('nan'), inf, 1e30]) for _ in r[max(n_, 0):]]\n"
        "    offsets = [rng.randint(0, 100) for _ in range(m)]\n"
        "    t = lambda v: torch.tensor(v, dtype=torch.int32)\n"
        "    got = topk_transform(torch.tensor(rows, dtype=torch.float32), t(lengths), t(offsets), k=k).tolist()\n"
        "    for g, r, n_, o in zip(got, rows, lengths, offsets):\n"
        "        want = topk(r, max(n_, 0), k, V41TopK(Width.FIXED), o)\n"
        "        assert sorted(g) == sorted(want) and g.count(-1) == want.count(-1), (g, want, r, n_, k)\n"
        "scores = torch.tensor([[-inf, -inf, 3.0]])\n"
        "print(sorted(topk_transform(scores, torch.tensor([3]), torch.tensor([0]), k=3)[0].tolist()))\n"
        "print(sorted(topk_transform(scores, torch.tensor([3]), torch.tensor([0]), k=2)[0].tolist()))\n"
        "past = torch.tensor([[-inf, -inf, -inf, 5.0, 6.0, 7.0, 8.0, 9.0]])\n"
        "print(topk_transform(past, torch.tensor([3]), torch.tensor([0]), k=2).tolist())\n"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    kept, dropped, beyond = out.stdout.splitlines()
    assert kept == "[0, 1, 2]"  # length 3 <= k 3: the -inf rows 0 and 1 kept
    assert dropped == "[-1, 2]"  # length 3 > k 2: the -inf row torch.topk chose dropped, the reference keeps 0
    # results/peers/repro_sglang_topk_transform_past_length.py
    assert any(r >= 3 for r in json.loads(beyond)[0]), beyond


def test_a_kernels_reproducers_are_merged_into_one_its_report_names(tmp_path: pathlib.Path) -> None:
    """``csa.peers.run`` keeps one reproducer per kernel: the per-failure ones its report names, merged."""
    from csa.peers.run import merge_reproducers
    from properties.reproducer import read_script, write_reproducer

    kernel = tmp_path / "minus_one.py"
    kernel.write_text("import torch\ndef topk(scores, lengths, offsets, *, k):\n"
                      "    return torch.full((scores.shape[0], k), -1, dtype=torch.int32)\n")  # fmt: skip
    examples = [{"scores": [[1.0, 2.0]], "lengths": [2], "offsets": [0], "k": 1}, {"scores": [[float("nan"), 2.0, 3.0]],
                "lengths": [3], "offsets": [0], "k": 2}]  # fmt: skip
    settings: dict[str, Any] = {
        "op": "topk",
        "impl_spec": f"{kernel}:topk",
        "convention": "v4.1",
        "device": "cpu",
        "timeout": 30.0,
    }
    scripts = [write_reproducer(tmp_path / "repro", prop="topk_lane_layout", example=e, **settings) for e in examples]
    failures = [{"error": "e", "reproducer": str(s)} for s in scripts]
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"properties": [{"property": "topk_lane_layout", "failures": failures}]}))
    merged = tmp_path / "repro" / "repro_kernel.py"
    merge_reproducers(report, merged)
    assert sorted(p.name for p in merged.parent.iterdir()) == ["repro_kernel.py"]
    assert {f["reproducer"] for f in json.loads(report.read_text())["properties"][0]["failures"]} == {str(merged)}
    read = read_script(merged)
    assert sorted(map(repr, read["cases"])) == sorted(repr(("topk_lane_layout", e)) for e in examples)
    assert {k: read[k] for k in settings} == settings
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"TRITON_INTERPRET": "1"}
    alone = subprocess.run([sys.executable, str(merged), "--in-process"], cwd="/", env=env, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert alone.returncode == 1 and alone.stdout.count("FAILS: topk_lane_layout") == 2, alone.stdout + alone.stderr


def test_jobs_below_one_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from csa.peers.run import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--jobs", "0", "--out", "/nonexistent/peers.md"])
    assert exit_info.value.code == 2
    assert "--jobs: must be at least 1, got 0" in capsys.readouterr().err


def test_kernels_judged_at_once_keep_the_catalog_order(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --jobs, the kernels run concurrently (the slowest first here) and the results keep PEERS's order."""
    import time

    from csa.peers import run

    peers = run.PEERS[:4]
    monkeypatch.setattr(run, "PEERS", peers)
    monkeypatch.setattr(run, "missing_reason", lambda engine: None)
    monkeypatch.setattr(run, "page", lambda saved, out_dir: "page\n")
    finished: list[str] = []

    def judge(peer: catalog.Peer, args: object, out_dir: pathlib.Path) -> dict[str, object]:
        time.sleep(0.2 * (len(peers) - peers.index(peer)))
        finished.append(peer.name)
        return {"peer": peer.name, "outcome": peer.expect, "seconds": 0.0}

    monkeypatch.setattr(run, "judge", judge)
    assert run.main(["--jobs", "4", "--out", str(tmp_path / "peers.md")]) == 0
    assert finished == [p.name for p in reversed(peers)]
    saved = json.loads((tmp_path / "peers" / "run.json").read_text())
    assert [r["peer"] for r in saved["results"]] == [p.name for p in peers]


CUDA_MACHINE = """
import types, torch
torch.cuda.is_available = lambda: True
torch.version.cuda = "13.0"
torch.cuda.get_device_name = lambda *a: "NVIDIA H200"
torch.cuda.get_device_capability = lambda *a: (9, 0)
torch.cuda.device_count = lambda: 1
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_properties = lambda *a: types.SimpleNamespace(
    name="NVIDIA H200", major=9, minor=0, multi_processor_count=132, total_memory=140e9, gcnArchName="")
from csa.peers.loader import load
"""


@pytest.mark.slow
def test_sglang_kernel_modules_load_as_on_a_cuda_machine() -> None:
    """On a CUDA machine SGLang's fp8_kernel.py imports sgl_per_token_quant_fp8 from its quantization package's
    __init__ (the compiled run judged no SGLang dequantization kernel before the loader ran it): with torch made
    to answer as an H200 does, every SGLang module the adapters use loads."""
    _needs("sglang")
    from csa.peers import sglang_ops

    names = [sglang_ops.CANDIDATES, sglang_ops.DEQUANT, sglang_ops.INDEX_CACHE, sglang_ops.INDEXER]
    code = CUDA_MACHINE + "".join(f"load('sglang', {n!r})\n" for n in names) + "print('loaded')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))  # fmt: skip
    assert out.returncode == 0 and "loaded" in out.stdout, out.stderr[-3000:]
