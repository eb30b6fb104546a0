"""``csa bytes``: what a model's KV cache, index cache and compression state cost for a context and batch."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from reference.accounting import ModelBytes, model_bytes, paged_bytes, preset_formats
from reference.formats import RENAMED, ROW_FORMATS
from reference.models import MODELS, model_preset

HELP = "KV-cache, index-cache and state bytes of a model preset for a context length and batch"
COMPONENTS = ("window", "compressed", "index", "state", "total")
HEADINGS = ("window ring", "compressed rows", "index rows", "state", "one layer", "all layers")
UNITS_NOTE = "units: B = byte; KiB, MiB, GiB, TiB, PiB = 2^10 .. 2^50 bytes (binary prefixes); GB = 10^9 bytes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help=f"one of: {', '.join(sorted(MODELS))}")
    parser.add_argument("--context", type=int, help="positions per sequence (default: the model's maximum)")
    parser.add_argument("--batch", type=int, default=1, help="sequences (default 1)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-mtp", action="store_true", help="leave out the MTP layers")
    parser.add_argument("--page-tokens", type=int, default=256, help="positions per allocator page (default 256)")
    parser.add_argument("--compressed-format", help=f"replace the compressed row format: {', '.join(ROW_FORMATS)}")
    parser.add_argument("--index-format", help=f"replace the index row format: {', '.join(ROW_FORMATS)}")


def binary(n: int) -> str:
    """``n`` bytes with a binary prefix, e.g. ``144.0 MiB``."""
    for unit, power in (("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << power:
            return f"{n / (1 << power):.1f} {unit}"
    return f"{n} B"


def exact_and_binary(n: int) -> str:
    return f"{n:,} B ({binary(n)}, {n / 10**9:.3f} GB)"


def _error(message: str) -> int:
    print(f"csa bytes: {message}", file=sys.stderr)
    return 2


def _report(result: ModelBytes, paged: int, page_tokens: int, formats: dict[str, str]) -> dict[str, Any]:
    return {
        "model": result.model,
        "context": result.context,
        "batch": result.batch,
        "formats": formats,
        "kinds": [
            {
                "kind": k.kind,
                "ratio": k.one_layer.ratio,
                "layers": list(k.layers),
                "per_layer": {c: getattr(k.one_layer, c) for c in COMPONENTS},
                "all_layers": {c: getattr(k.one_layer, c) * k.count for c in COMPONENTS},
            }
            for k in result.kinds
        ],
        "per_sequence": {c: result.per_sequence(c) for c in COMPONENTS},
        "total": {c: result.total(c) for c in COMPONENTS},
        "paged_compressed_and_index_per_sequence": {"page_tokens": page_tokens, "bytes": paged},
    }


def _table(report: dict[str, Any], source: str) -> str:
    lines = [
        f"{report['model']}: config {source}; context {report['context']:,}, batch {report['batch']}",
        "formats: " + ", ".join(f"{role} {name}" for role, name in report["formats"].items()),
        "",
        f"{'layer kind':<38}{'layers':>7}" + "".join(f"{h:>17}" for h in HEADINGS),
    ]
    for k in report["kinds"]:
        cells = [k["per_layer"][c] for c in COMPONENTS] + [k["all_layers"]["total"]]
        lines.append(f"{k['kind']:<38}{len(k['layers']):>7}" + "".join(f"{binary(v):>17}" for v in cells))
    per_sequence = report["per_sequence"]
    lines += ["", "per sequence:"]
    lines += [f"  {c:<11}{exact_and_binary(per_sequence[c])}" for c in COMPONENTS]
    lines.append(f"batch {report['batch']} total: {exact_and_binary(report['total']['total'])}")
    paged = report["paged_compressed_and_index_per_sequence"]
    lines.append(
        f"compressed + index rows in {paged['page_tokens']}-position pages (public layouts, padding "
        f"included), per sequence: {exact_and_binary(paged['bytes'])}"
    )
    lines.append(UNITS_NOTE)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.model not in MODELS:
        return _error(f"unknown model {args.model!r}; known: {', '.join(sorted(MODELS))}")
    model = model_preset(args.model)
    context = model.max_context if args.context is None else args.context
    if context < 0:
        return _error(f"--context must be >= 0, got {context}")
    if args.batch < 1:
        return _error(f"--batch must be >= 1, got {args.batch}")
    if context > model.max_context:
        print(
            f"csa bytes: warning: --context {context:,} is past {model.name}'s maximum context of "
            f"{model.max_context:,} positions; the figures extrapolate its layout",
            file=sys.stderr,
        )
    for option, value in (("--compressed-format", args.compressed_format), ("--index-format", args.index_format)):
        if value is not None and value in RENAMED:
            return _error(f"{option} {value!r} is now spelled {RENAMED[value]!r}")
        if value is not None and value not in ROW_FORMATS:
            return _error(f"{option} {value!r} is unknown; known: {', '.join(ROW_FORMATS)}")
    formats = preset_formats(model, compressed=args.compressed_format, index=args.index_format)
    try:
        paged = paged_bytes(model, context, args.page_tokens, formats)
    except ValueError as error:
        return _error(f"--page-tokens: {error}")
    result = model_bytes(model, context, args.batch, include_mtp=not args.no_mtp, formats=formats)
    names = {
        "window": f"{formats.window.name} ({formats.window.row_bytes} B/row)",
        "compressed": f"{formats.compressed.name} ({formats.compressed.row_bytes} B/row)",
        "index": f"{formats.index.name} ({formats.index.row_bytes} B/row)",
    }
    report = _report(result, paged, args.page_tokens, names)
    print(json.dumps(report, indent=2) if args.json else _table(report, model.config_source))
    return 0
