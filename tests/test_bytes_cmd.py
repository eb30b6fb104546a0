"""``csa bytes``: the table and JSON for the required invocations, totals by hand, one-line errors."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from csa.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONTEXT = 1_048_576


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["bytes", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_v41_flash_at_1m_totals_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    report = _json(capsys, "--model", "v4.1-flash", "--context", str(CONTEXT))
    window = 43 * 128 * 528
    compressed = 3 * (CONTEXT // 2) * 288 + CONTEXT * 288
    index = 3 * (CONTEXT // 2) * 68 + CONTEXT * 68
    state = 3 * 7 * 2 * 512 * 4
    assert report["per_sequence"] == {
        "window": window,
        "compressed": compressed,
        "index": index,
        "state": state,
        "total": window + compressed + index + state,
    }
    kinds = {k["kind"]: len(k["layers"]) for k in report["kinds"]}  # type: ignore[attr-defined]
    assert kinds == {
        "ratio 0, window only": 2,
        "C2 source: KV + index keys": 3,
        "C2 consumer: reads its source's rows": 15,
        "C1 source: KV + index keys": 1,
        "C1 consumer: reads its source's rows": 19,
        "MTP layer, window only": 3,
    }


def test_v4_pro_defaults_to_the_maximum_context_and_scales_with_batch(capsys: pytest.CaptureFixture[str]) -> None:
    one = _json(capsys, "--model", "v4-pro")
    four = _json(capsys, "--model", "v4-pro", "--batch", "4")
    assert one["context"] == CONTEXT
    assert four["total"]["total"] == 4 * one["per_sequence"]["total"]  # type: ignore[index]
    assert one["per_sequence"]["index"] == 30 * (CONTEXT // 4) * 132  # type: ignore[index]


def test_table_names_units_and_shows_exact_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bytes", "--model", "v4.1-flash", "--context", str(CONTEXT)]) == 0
    out = capsys.readouterr().out
    total = 43 * 128 * 528 + (3 * CONTEXT // 2 + CONTEXT) * (288 + 68) + 3 * 28_672
    assert f"total      {total:,} B" in out
    assert "binary prefixes" in out and "C2 source: KV + index keys" in out
    assert "144.0 MiB" in out  # one C2 source: 524,288 rows x 288 B


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "v5"], "csa bytes: unknown model 'v5'; known: v4-flash, v4-pro, v4.1-flash\n"),
        (["--model", "v4-pro", "--context", "-1"], "csa bytes: --context must be >= 0, got -1\n"),
        (["--model", "v4-pro", "--batch", "0"], "csa bytes: --batch must be >= 1, got 0\n"),
        (
            ["--model", "v4-pro", "--page-tokens", "64"],
            "csa bytes: --page-tokens: block_tokens: must be a multiple of the ratio 128, got 64\n",
        ),
        (
            ["--model", "v4-pro", "--index-format", "fp6"],
            "csa bytes: --index-format 'fp6' is unknown; known: "
            "v4_584, v41_fp8_528, v41_fp4_288, index_fp4_68, index_fp8_132\n",
        ),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["bytes", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.err == message and captured.out == ""


def test_runs_as_a_module_from_the_repository() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "csa.cli", "bytes", "--model", "v4-flash", "--context", "4096"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("v4-flash: config huggingface.co/deepseek-ai/DeepSeek-V4-Flash")


def test_a_context_past_the_models_maximum_warns_and_large_totals_read_in_tib(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bytes", "--model", "v4.1-flash", "--context", str(2**40)]) == 0
    out, err = capsys.readouterr()
    assert "warning: --context 1,099,511,627,776 is past v4.1-flash's maximum context of 1,048,576" in err
    assert "total      978,565,351,712,768 B (890.0 TiB, 978565.352 GB)" in out


def test_the_maximum_context_gives_no_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bytes", "--model", "v4.1-flash", "--context", str(2**20)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_readme_shows_the_output_csa_bytes_prints(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    shown = readme.split("--context 1048576 | tail -n 3\n")[1].split("\n```")[0]
    assert main(["bytes", "--model", "v4.1-flash", "--context", "1048576"]) == 0
    assert capsys.readouterr().out.rstrip("\n").split("\n")[-3:] == shown.split("\n")


def test_csa_fuzz_without_the_extras_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import csa.fuzz_cmd

    def missing(args: object) -> int:
        raise ModuleNotFoundError("No module named 'hypothesis'", name="hypothesis")

    monkeypatch.setattr(csa.fuzz_cmd, "run", missing)
    assert main(["fuzz", "--list"]) == 2
    assert "csa fuzz: needs hypothesis, which is not installed: run `make check`" in capsys.readouterr().err


def test_an_earlier_format_spelling_is_refused_naming_the_new(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bytes", "--model", "v4-pro", "--index-format", "index-fp4"]) == 2
    assert "--index-format 'index-fp4' is now spelled 'index_fp4_68'" in capsys.readouterr().err
