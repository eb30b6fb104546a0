"""``csa fuzz`` end to end: a broken kernel outside the package exits 1 with a reproducer that fails alone; the
project's own kernel exits 0; a kernel that hangs, crashes, raises, changes an input or writes past its output is
reported with its input and a reproducer; usage and loading errors exit 2 with one line, before the run."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest
import torch

from properties.catalog import properties_for

ROOT = pathlib.Path(__file__).resolve().parents[1]
BROKEN = ROOT / "examples" / "broken_topk.py"
MISBEHAVING = ROOT / "examples" / "misbehaving.py"
ON_CUDA = os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available()


def csa(
    *args: str, cwd: pathlib.Path, interpret: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(ROOT))
    full.pop("CI", None)
    if interpret:
        full["TRITON_INTERPRET"] = "1"
    else:
        full.pop("TRITON_INTERPRET", None)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "csa.cli", "fuzz", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=600
    )


def reproducers(cwd: pathlib.Path) -> list[pathlib.Path]:
    return sorted((cwd / "repro").glob("repro_*.py"))


def standalone(script: pathlib.Path, *args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a reproducer with no PYTHONPATH, from another directory: it restores the import path it needs."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd or script.parent.parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_broken_topk_is_caught_with_a_standalone_reproducer(tmp_path: pathlib.Path) -> None:
    report = tmp_path / "report.json"
    run = csa(
        "--op",
        "topk",
        "--impl",
        f"{BROKEN}:topk",
        "--convention",
        "v4.1",
        "--max-examples",
        "30",
        "--report",
        str(report),
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED" in run.stdout and "expected" in run.stdout
    repro = reproducers(tmp_path)
    assert len(repro) == 1
    alone = standalone(repro[0])
    assert alone.returncode == 1 and alone.stdout.startswith("FAILS:"), alone.stdout + alone.stderr
    assert '"result": "bug"' in report.read_text()


@pytest.mark.parametrize("entry", ["topk_v41", "topk_v41_split_one_launch", "topk_v41_split_two_launches"])
def test_the_projects_topk_passes(tmp_path: pathlib.Path, entry: str) -> None:
    """Compiled on a CUDA machine (this project's Triton kernels need triton >= 3.8 to run interpreted)."""
    compiled = os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available()
    device = ("--device", "cuda") if compiled else ()
    run = csa("--op", "topk", "--impl", f"fast.indexing.entry_points:{entry}", "--max-examples", "10", *device,
              cwd=tmp_path, interpret=not compiled)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS: 7 properties" in run.stdout
    assert "\x1b[" not in run.stdout  # no progress line where output is not a terminal


KERNEL = ("--op", "topk", "--impl", f"{BROKEN}:topk", "--convention", "v4.1")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--op", "nope", "--impl", "x:y"], "--op: unknown operation"),
        (["--op", "topk", "--impl", f"{BROKEN}:topk", "--convention", "v9"], "--convention: topk has no convention"),
        (["--op", "topk", "--impl", f"{BROKEN}:topk"], "--convention: topk needs one of"),
        (["--op", "topk", "--impl", "os:getcwd", "--convention", "v4.1"], "--impl: topk needs a callable"),
        (["--op", "topk", "--impl", "no_such_module_here:f", "--convention", "v4.1"], "--impl: importing"),
        (["--op", "topk", "--impl", f"{BROKEN}:missing", "--convention", "v4.1"], "has no callable"),
        (["--op", "topk", "--impl", "no-colon", "--convention", "v4.1"], "--impl: expected"),
        (["--op", "topk", "--impl", "nowhere/k.py:topk", "--convention", "v4.1"], "--impl: no such file nowhere/k.py"),
        ([*KERNEL, "--report", "afile/report.json"], "--report: cannot write afile/report.json: afile is not a dir"),
        ([*KERNEL, "--repro-dir", "afile/repro"], "--repro-dir: cannot create afile/repro"),
        (["--self-test", "--max-examples", "-5"], "--max-examples: must be a positive integer, got -5"),
        (["--list", "--op", "nope"], "--op: unknown operation 'nope'"),
        ([*KERNEL, "--timeout", "0"], "--timeout: must be a positive number"),
        ([*KERNEL, "--shrink-seconds", "-1"], "--shrink-seconds: must be zero or more"),
        ([*KERNEL, "--sanitize"], "--sanitize: compute-sanitizer checks GPU kernels; it needs --device cuda"),
        ([*KERNEL, "--property", "nope"], "--property: topk has no property 'nope'"),
        ([*KERNEL, "--max-examples", "many"], "argument --max-examples: invalid int value: 'many'"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path: pathlib.Path, args: list[str], message: str) -> None:
    """Each is found before the run (nothing on stdout) and is one line, never a traceback."""
    (tmp_path / "afile").write_text("a file, not a directory\n")
    run = csa(*args, cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert message in run.stderr and run.stderr.count("\n") == 1, run.stderr
    assert run.stdout == "" and "Traceback" not in run.stderr
    assert not (tmp_path / "repro").exists()


def test_a_kernel_that_crashes_while_loading_is_a_loading_error(tmp_path: pathlib.Path) -> None:
    (tmp_path / "crash.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    run = csa("--op", "topk", "--impl", "crash.py:topk", "--convention", "v4.1", cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == "", run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and "SIGSEGV" in run.stderr and 'crash.py", line 2' in run.stderr


def test_list_op_lists_only_that_operation(tmp_path: pathlib.Path) -> None:
    run = csa("--list", "--op", "quantize_store", cwd=tmp_path)
    assert run.returncode == 0
    assert run.stdout.startswith("quantize_store: ") and "topk" not in run.stdout
    assert "in place: cache" in run.stdout
    assert "views: rows, slots may arrive non-contiguous" in run.stdout


def test_a_reader_that_goes_away_ends_the_output_silently(tmp_path: pathlib.Path) -> None:
    """``csa fuzz --list | head -c 0``: the pipe is closed before anything is written."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "csa.cli", "fuzz", "--list"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert stderr == b"", stderr.decode()


def failure_blocks(stdout: str) -> list[tuple[str, str, pathlib.Path]]:
    """Each printed failure: (the input as printed, the error as printed, the reproducer's path)."""
    found = []
    for block in re.split(r"\n(?:failure \d+ of \d+: )?property: ", stdout)[1:]:
        lines = block.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith(("input", "shrunk input")))
        end = next(i for i, line in enumerate(lines) if line.startswith("reproducer: "))
        found.append((lines[at].split(": ", 1)[1], "\n".join(lines[at + 1 : end]), pathlib.Path(lines[end].split()[1])))
    return found


def test_message_input_and_reproducer_tell_one_story(tmp_path: pathlib.Path) -> None:
    """Several replayed examples fail, differently: every printed failure's message is the one its printed input
    gives, and its reproducer holds that input and prints that message; a property with two distinct failures
    prints both. Under CI=true the profile is ci."""
    props = ("--property", "topk_equals_reference", "--property", "topk_chosen_set_optimal")
    run = csa(*KERNEL, *props, "--keep-going", "--max-examples", "30", cwd=tmp_path, env={"CI": "true"})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "30 examples per property (profile ci: CI is set; --max-examples)" in run.stdout
    assert "ExceptionGroup" not in run.stdout
    assert "2 distinct failures of topk_chosen_set_optimal, each with its own input and reproducer" in run.stdout
    blocks = failure_blocks(run.stdout)
    assert len(blocks) == 3 and len({path for _, _, path in blocks}) == 3, run.stdout
    props_shown = ["topk_equals_reference", "topk_chosen_set_optimal", "topk_chosen_set_optimal"]
    for (shown, message, path), prop in zip(blocks, props_shown, strict=True):
        script = tmp_path / path
        assert f"({prop!r}, {shown})," in script.read_text()
        alone = standalone(script, "--in-process")  # as the worker would, without starting one
        assert alone.returncode == 1 and alone.stdout == f"FAILS: {prop}\n{message}\n", (message, alone.stdout)


def test_profile_flag_wins_over_ci(tmp_path: pathlib.Path) -> None:
    run = csa(*KERNEL, "--property", "topk_equals_reference", "--profile", "dev", cwd=tmp_path, env={"CI": "true"})
    assert "300 examples per property (profile dev: --profile)" in run.stdout, run.stdout


def test_a_cpu_run_draws_the_ci_shape_tier_unless_told(tmp_path: pathlib.Path) -> None:
    """The tile tier's 4097-wide rows take an interpreted Triton kernel past its time limit: a CPU run takes the
    ci tier (whose sizes still cross every tile), and CSA_SHAPES overrides it."""
    args = (*KERNEL, "--property", "topk_equals_reference", "--max-examples", "2", "--report", "r.json")
    run = csa(*args, cwd=tmp_path)
    assert "  shapes: the ci tier of the shape ladders (a CPU run;" in run.stdout, run.stdout
    assert json.loads((tmp_path / "r.json").read_text())["shape_tier"] == "ci"
    run = csa(*args, cwd=tmp_path, env={"CSA_SHAPES": "tile"})
    assert "  shapes: the tile tier of the shape ladders (CSA_SHAPES;" in run.stdout, run.stdout
    assert json.loads((tmp_path / "r.json").read_text())["shape_tier"] == "tile"


LATE_BUG = """
import torch
from fast.indexing import naive

def topk(scores, lengths, offsets, *, k):
    out = naive.topk(scores, lengths, k=k, convention="v4.1", offsets=offsets)
    if scores.shape[1] > 8 and int(offsets.max()) > 2:  # BUG: on wide rows with large offsets only
        out = torch.where(out >= 0, out + 1, out)
    return out
"""


def test_shrink_seconds_cuts_shrinking_and_the_report_says_so(tmp_path: pathlib.Path) -> None:
    """The frozen examples pass; a generated one fails and is not shrunk once the budget is spent."""
    (tmp_path / "late.py").write_text(LATE_BUG)
    args = ["--op", "topk", "--impl", "late.py:topk", "--convention", "v4.1", "--max-examples", "30"]
    run = csa(*args, "--shrink-seconds", "0", "--report", "r.json", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "input (shrinking stopped after --shrink-seconds 0): {" in run.stdout, run.stdout
    entry = json.loads((tmp_path / "r.json").read_text())["properties"][0]
    assert entry["shrink_cut"] is True


def test_a_hanging_kernel_is_reported_within_its_limit(tmp_path: pathlib.Path) -> None:
    start = time.monotonic()
    run = csa("--op", "topk", "--impl", f"{MISBEHAVING}:hangs", "--timeout", "1", "--shrink-seconds", "0",
              "--property", "topk_equals_reference", "--report", "r.json", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "time limit 1 s per call (--timeout)" in run.stdout
    assert "KernelTimeout: timed out after 1 s (the worker was killed and restarted)" in run.stdout
    ((shown, _, path),) = failure_blocks(run.stdout)
    assert shown.startswith("{'scores': ") and (tmp_path / path).is_file()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["timeout_s"] == 1.0 and report["properties"][0]["seconds"] < 10
    assert time.monotonic() - start < 120


@pytest.mark.parametrize(
    ("kernel", "error"),
    [
        ("segfaults", "KernelCrash: the worker running the kernel died with SIGSEGV (signal 11)"),
        ("raises", "IndexError: list index out of range"),
    ],
)
def test_a_crashing_or_raising_kernel_is_reported_and_the_run_goes_on(
    tmp_path: pathlib.Path, kernel: str, error: str
) -> None:
    """It fails only on an empty row: each property reports it with that input, and the run goes on to the next
    property (in a fresh worker after a crash); the reproducer, run alone, reports the same error type."""
    run = csa("--op", "topk", "--impl", f"{MISBEHAVING}:{kernel}", "--keep-going", "--shrink-seconds", "0",
              "--property", "topk_equals_reference", "--property", "topk_lane_layout", "--max-examples", "20",
              cwd=tmp_path)  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.count(error) == 2, run.stdout
    assert "FAIL: 2 of 2 properties failed (topk_equals_reference, topk_lane_layout)" in run.stdout
    blocks = failure_blocks(run.stdout)
    assert all(re.search(r"'lengths': \[[^]]*\b0\b", shown) for shown, _, _ in blocks)
    alone = standalone(tmp_path / blocks[0][2])
    assert alone.returncode == 1 and alone.stdout.startswith(f"FAILS: topk_equals_reference\n{error}"), alone.stdout


def test_an_input_mutating_kernel_fails_naming_the_argument(tmp_path: pathlib.Path) -> None:
    run = csa("--op", "topk", "--impl", f"{MISBEHAVING}:shifts_offsets", "--max-examples", "10", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Mismatch: topk: the call modified its input(s) offsets (the contract declares no argument in place)" in (
        run.stdout
    )
    assert "  at offsets[0]: expected 0, got 7" in run.stdout


def test_a_kernel_writing_one_byte_past_its_output_fails(tmp_path: pathlib.Path) -> None:
    """On the GPU the same kernel runs compiled (``--device cuda``); here the Triton interpreter runs it."""
    device = ("--device", "cuda") if ON_CUDA else ()
    run = csa("--op", "quantize_store", "--impl", f"{MISBEHAVING}:store_past_end", "--convention", "v41_fp8_528",
              "--property", "quant_store_matches_reference", "--max-examples", "10", "--shrink-seconds", "0", *device,
              cwd=tmp_path, interpret=not ON_CUDA)  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Mismatch: quantize_store: the call wrote outside its argument(s) cache" in run.stdout
    assert "  at byte 0 past the end of cache: expected ef (guard), got 00" in run.stdout


def test_a_reproducer_restores_the_import_path_of_a_module_kernel(tmp_path: pathlib.Path) -> None:
    """The kernel is importable only through the PYTHONPATH of the fuzz run; the reproducer runs without it."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "user_kernels.py").write_text(BROKEN.read_text())
    run = csa("--op", "topk", "--impl", "user_kernels:topk", "--convention", "v4.1", "--property",
              "topk_equals_reference", cwd=tmp_path, env={"PYTHONPATH": f"{ROOT}{os.pathsep}{lib}"})  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    (script,) = reproducers(tmp_path)
    assert str(lib) in script.read_text()
    alone = standalone(script, "--in-process", cwd=pathlib.Path("/"))
    assert alone.returncode == 1 and alone.stdout.startswith("FAILS: topk_equals_reference"), alone.stderr


def test_a_progress_line_is_drawn_on_a_terminal(tmp_path: pathlib.Path) -> None:
    """Off a terminal nothing is drawn: test_the_projects_topk_passes sees no escape sequence."""
    import pty

    args = [*KERNEL, "--property", "topk_valid_prefix_only", "--max-examples", "25"]
    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1", COLUMNS="160")
    proc = subprocess.Popen([sys.executable, "-m", "csa.cli", "fuzz", *args], cwd=tmp_path, env=env,
                            stdout=follower, stderr=follower)  # fmt: skip
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(timeout=300) == 0
    text = seen.decode(errors="replace")
    assert "[1/1] topk_valid_prefix_only" in text and "examples/s" in text and "of ~" in text, text


def test_list_names_every_operation(tmp_path: pathlib.Path) -> None:
    from properties.contract import OPERATIONS

    run = csa("--list", cwd=tmp_path)
    assert run.returncode == 0
    assert all(name in run.stdout for name in OPERATIONS)


def test_a_reproducer_written_before_the_layout_change_still_runs(tmp_path: pathlib.Path) -> None:
    """A reproducer that ``csa fuzz`` wrote on a683d9f (the tree before properties/ was grouped by area) imports
    only ``properties.catalog`` and ``properties.registry``: it must still run and still find the bug."""
    text = (ROOT / "tests" / "fixtures" / "repro_written_by_a683d9f.txt").read_text()
    script = tmp_path / "repro.py"
    script.write_text(text.replace("EXAMPLES/", f"{ROOT / 'examples'}/"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith("FAILS: topk_equals_reference"), run.stdout


SANITIZER = None
if ON_CUDA:
    from properties import sanitizer

    SANITIZER = sanitizer.find()
needs_sanitizer = pytest.mark.skipif(SANITIZER is None, reason="needs a CUDA device and compute-sanitizer")


@pytest.mark.gpu
@pytest.mark.skipif(not ON_CUDA, reason="needs a CUDA device (compiled Triton)")
def test_a_far_out_of_bounds_read_on_the_gpu_is_reported_and_the_run_goes_on(tmp_path: pathlib.Path) -> None:
    run = csa("--op", "topk", "--impl", f"{MISBEHAVING}:reads_far", "--device", "cuda", "--keep-going",
              "--shrink-seconds", "0", "--max-examples", "5", "--property", "topk_equals_reference", "--property",
              "topk_lane_layout", cwd=tmp_path, interpret=False)  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.count("illegal memory access") >= 2, run.stdout
    assert "FAIL: 2 of 2 properties failed" in run.stdout and "worker restart(s)" in run.stdout
    assert all(shown.startswith("{'scores': ") for shown, _, _ in failure_blocks(run.stdout))


@pytest.mark.gpu
@needs_sanitizer
def test_sanitize_passes_the_projects_triton_topk(tmp_path: pathlib.Path) -> None:
    run = csa("--op", "topk", "--impl", "fast.indexing.entry_points:topk_v41", "--device", "cuda",
              "--max-examples", "10", "--sanitize", cwd=tmp_path, interpret=False)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    replayed = len(properties_for("topk"))  # the first example of each property
    assert f"compute-sanitizer memcheck: 0 errors on {replayed} example(s)" in run.stdout, run.stdout


@pytest.mark.gpu
@needs_sanitizer
def test_sanitize_reports_memchecks_first_error(tmp_path: pathlib.Path) -> None:
    run = csa("--op", "quantize_store", "--impl", f"{MISBEHAVING}:store_past_end", "--convention", "v41_fp8_528",
              "--device", "cuda", "--property", "quant_store_matches_reference", "--max-examples", "5",
              "--shrink-seconds", "0", "--sanitize", cwd=tmp_path, interpret=False)  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "error(s); the first:" in run.stdout and "Invalid __global__ write of size 1 bytes" in run.stdout, run.stdout


def test_list_fits_in_100_columns_and_names_each_conventions_rule(capsys: pytest.CaptureFixture[str]) -> None:
    from csa.cli import main
    from properties.contract import OPERATIONS
    from reference.conventions import CONVENTIONS

    for op in [None, *OPERATIONS]:
        assert main(["fuzz", "--list", *(["--op", op] if op else [])]) == 0
        out = capsys.readouterr().out
        assert max(len(line) for line in out.splitlines()) <= 100, op
        if op:
            assert all(f"{name}: {c.summary}" in out for name, c in CONVENTIONS[op].items())


TRITON_STORE = ROOT / "examples" / "triton_index_store.py"
STORE_ARGS = (
    "--op", "quantize_store", "--impl", f"{TRITON_STORE}:store", "--convention", "index_fp8_132+f32_scale",
    "--leave-out", "bad_input", "--property", "quant_store_matches_reference",
)  # fmt: skip


def test_interpreter_casts_are_patched_and_said(tmp_path: pathlib.Path) -> None:
    """A user's Triton store that casts fp32 to e4m3 passes on the CPU: csa fuzz rounds the interpreter's casts as
    compiled code does, and says so; bad_input is reported as left out."""
    report = tmp_path / "report.json"
    run = csa(*STORE_ARGS, "--max-examples", "8", "--report", str(report), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "  left out (--leave-out bad_input): none of the properties to run is in it\n" in run.stdout
    assert re.search(
        r"Triton interpreter: \d+ fp32 -> bf16 / e4m3 cast element\(s\) rounded to nearest even", run.stdout
    )
    data = json.loads(report.read_text())
    assert data["interpreter_casts"]["patched"] and data["interpreter_casts"]["rounded"] > 0
    assert data["left_out"] == {"groups": ["bad_input"], "properties": []}


def test_without_the_patch_the_interpreter_fails_a_correct_kernel(tmp_path: pathlib.Path) -> None:
    script = (
        "import sys, properties.interpreter_casts as casts\n"
        "casts.install = lambda: False\n"
        "from csa.cli import main\n"
        f"sys.exit(main(['fuzz', *{list(STORE_ARGS)!r}, '--in-process', '--max-examples', '20', "
        "'--shrink-seconds', '1']))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET="1")
    env.pop("CI", None)
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "quantize_store bytes" in run.stdout and "Triton interpreter:" not in run.stdout


def test_leave_out_bad_input_reports_what_it_left_out(tmp_path: pathlib.Path) -> None:
    run = csa(
        "--op", "candidate_restore", "--impl", "registry:candidate_restore:reference", "--leave-out", "bad_input",
        "--max-examples", "3", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "  left out (--leave-out bad_input): candidate_restore_refuses_bad_padding\n" in run.stdout
    assert "candidate_restore_refuses_bad_padding ..." not in run.stdout
    assert re.search(r"PASS: \d+ properties \(1 left out: bad_input\)", run.stdout)
    bad = csa("--op", "topk", "--impl", f"{BROKEN}:topk", "--leave-out", "nope", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr == "csa fuzz: --leave-out: no property group 'nope'; known: bad_input\n"


def test_a_reproducer_inside_its_kernels_tree_runs_from_a_copy_of_the_tree(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reproducer written inside the tree that holds its kernel names that tree relative to itself (the harness,
    outside it, by its absolute path): moved with the tree, it still loads the kernel and shows the failure."""
    import shutil

    from properties.reproducer import read_script, write_reproducer

    tree = tmp_path / "tree"
    (tree / "kernels").mkdir(parents=True)
    (tree / "kernels" / "minus_one.py").write_text(
        "import torch\ndef topk(scores, lengths, offsets, *, k):\n"
        "    return torch.full((scores.shape[0], k), -1, dtype=torch.int32)\n"
    )
    monkeypatch.syspath_prepend(str(tree))  # the kernel imported as csa fuzz imports a module:callable spec
    script = write_reproducer(tree / "results" / "repro", prop="topk_lane_layout", op="topk",
                              impl_spec="kernels.minus_one:topk", convention="v4.1", device="cpu", timeout=60.0,
                              example={"scores": [[1.0, 2.0]], "lengths": [2], "offsets": [0], "k": 1})  # fmt: skip
    source = script.read_text()
    assert str(tree) not in source and str(ROOT) in source and "'../..'" in source, source
    moved = tmp_path / "moved"
    shutil.move(tree, moved)
    copy = moved / "results" / "repro" / script.name
    assert read_script(copy)["paths"] == [str(ROOT), str(moved)]
    out = standalone(copy, cwd=tmp_path)
    assert out.returncode == 1 and "FAILS: topk_lane_layout" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
