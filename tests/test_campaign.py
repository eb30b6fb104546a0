"""Campaigns across processes and machines: the shared Redis example database, one key per (property,
implementation), and the commands a campaign runs."""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from csa import campaign

ROOT = pathlib.Path(__file__).resolve().parents[1]
NO_REDIS = (
    "redis-server is not installed: make check installs it from the system packages where it can "
    "(apt-get install redis-server)"
)

# One worker of a campaign: run a property on a mutant against the shared database. "find" generates, shrinks and
# saves the failure; "replay" runs only what the database holds (no explicit, no generated examples).
WORKER = """
import dataclasses, sys, unittest
from hypothesis import Phase, settings
from properties.catalog import all_properties
from properties.mutants import register_mutants
from properties.profiles import example_database
from properties.runner import hypothesis_test

mode, url, prop_name, mutant_id = sys.argv[1:]
prop = dataclasses.replace(next(p for p in all_properties() if p.name == prop_name), examples=())
mutant = next(m for m in register_mutants().find() if m.id == mutant_id)
tried = []
phases = [Phase.generate, Phase.shrink] if mode == "find" else [Phase.reuse]
test = settings(database=example_database(url), phases=phases, max_examples=200, derandomize=False,
                deadline=None, print_blob=False)(hypothesis_test(prop, mutant, record=tried))
try:
    test()
except unittest.SkipTest:  # nothing saved to replay
    pass
except Exception:
    print(f"FAILED after {len(tried)} example(s); first {tried[0]!r}; last {tried[-1]!r}")
    sys.exit(1)
print(f"passed after {len(tried)} example(s)")
"""
PROPERTY = "topk_equals_reference"
MUTANT = "topk:topk_reads_past_valid_end[select]"


@pytest.fixture
def redis_url(tmp_path: pathlib.Path) -> Iterator[str]:
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip(NO_REDIS)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = [server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    process = subprocess.Popen([*args, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)


def worker(tmp_path: pathlib.Path, mode: str, url: str, prop: str = PROPERTY) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    command = [sys.executable, str(script), mode, url, prop, MUTANT]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_a_failure_the_first_worker_finds_is_replayed_first_by_the_second(
    tmp_path: pathlib.Path, redis_url: str
) -> None:
    before = worker(tmp_path, "replay", redis_url)
    assert before.returncode == 0 and "passed after 0 example(s)" in before.stdout, before.stdout + before.stderr
    first = worker(tmp_path, "find", redis_url)
    assert first.returncode == 1, first.stdout + first.stderr
    second = worker(tmp_path, "replay", redis_url)
    assert second.returncode == 1, second.stdout + second.stderr
    shrunk = first.stdout.split("; last ")[1]
    assert second.stdout.split("; first ")[1].split("; last ")[0] == shrunk.strip(), (first.stdout, second.stdout)
    other = worker(tmp_path, "replay", redis_url, prop="topk_lane_layout")
    assert "passed after 0 example(s)" in other.stdout, "a saved failure leaked into another property's key"


def test_each_property_and_implementation_has_its_own_database_key() -> None:
    from hypothesis.internal.reflection import function_digest

    from properties.catalog import all_properties
    from properties.registry import discover
    from properties.runner import applicable, hypothesis_test

    pairs = applicable(all_properties(), discover().find())
    keys = {function_digest(hypothesis_test(p, i).hypothesis.inner_test) for p, i in pairs}  # type: ignore[attr-defined]
    assert len(keys) == len(pairs)


def test_one_fuzz_process_per_gpu_each_seeing_its_own() -> None:
    processes = campaign.fuzz_commands(gpus=3, workers=8, extra=["-k", "topk"])
    assert [env for env, _ in processes] == [{"CUDA_VISIBLE_DEVICES": str(g)} for g in range(3)]
    assert all(cmd[-3:] == [campaign.TARGETS, "-k", "topk"] and "-n" in cmd for _, cmd in processes)
    assert campaign.fuzz_commands(gpus=0, workers=8, extra=[])[0][1][-4:] == ["-n", "8", "--", campaign.TARGETS]


def test_the_fuzz_targets_are_hypothesis_tests_of_every_pair() -> None:
    from hypothesis.internal.detection import is_hypothesis_test

    from properties import fuzz_targets
    from properties.catalog import all_properties
    from properties.registry import discover
    from properties.runner import applicable

    assert len(fuzz_targets.TARGETS) == len(applicable(all_properties(), discover().find()))
    assert all(name.startswith("test_") and is_hypothesis_test(t) for name, t in fuzz_targets.TARGETS.items())
