"""Fit ``fast.cache.pair_timing``'s costs to the H100 probes (``H100_ONE_ITEM``) and print them with each probe's
model figure, then the two-item probes outside the fit (``H100_TWO_ITEMS``).

    python scripts/fit_pair_timing.py [--iterations 1500] [--joint]

``--joint`` fits both sets at once, with a cost a program (``Costs.item``) free as well, and prints what the
changes of docs/targets.md's table give under those costs.

Least squares of the relative errors, by Nelder-Mead from ``H100_B64_H64`` itself moved by a fixed factor (so a
change to the model shows in a fit that no longer returns to it). Written out here rather than imported: the
project has no optimizer among its dependencies, and the 30 lines below are the textbook simplex.
"""

from __future__ import annotations

import argparse
import dataclasses
import math

from fast.cache import pair_timing as timing

NAMES = ("score", "softmax", "exp", "convert_left", "latency", "issue", "bandwidth", "share", "item")


def costs_of(x: list[float]) -> timing.Costs:
    """Costs from the fitted values (a p v product costs what a score half does; a right half converts in 3/4 of
    a left one's time, its 3 chunks of 4)."""
    score, softmax, exp, convert, latency, issue, bandwidth, share, *item = (max(v, 0.0) for v in x)
    base = timing.H100_B64_H64
    work = {"softmax": softmax, "exp": exp, "rescale": 0.0, "convert_left": convert, "convert_right": 0.75 * convert}
    held = {"convert_left": min(share, 1.0), "convert_right": min(share, 1.0)}
    return dataclasses.replace(base, mma={"score": score, "pv": score}, work=work, latency=latency, issue=issue,
                               bandwidth=max(bandwidth, 1.0), pipe_share=held, item=sum(item))  # fmt: skip


Sets = list[tuple[list[int], list[tuple[str, int, float]]]]
SETS: Sets = [([16], timing.H100_ONE_ITEM), ([16, 16], timing.H100_TWO_ITEMS)]


def error(x: list[float], sets: Sets) -> float:
    """The root mean square of the relative errors over the probes of ``sets`` (items a program, probes)."""
    costs = costs_of(x)
    errors = [timing.program_time(r, items, costs, p) / m - 1 for items, probes in sets for r, p, m in probes]
    return math.sqrt(sum(e * e for e in errors) / len(errors))


def changes(costs: timing.Costs) -> dict[str, tuple[float, float]]:
    """docs/targets.md's table: one program of 16 pairs, (BF16 rows, V4 FP8 in the boundary order), us."""
    free = dataclasses.replace(costs, issue=0.0, latency=0.0, bandwidth=1e12)
    unconverted = dataclasses.replace(costs, work={**costs.work, "convert_left": 0.0, "convert_right": 0.0})
    cases = {"nothing": costs, "copies cost nothing": free, "conversions cost nothing": unconverted,
             "conversions leave the tensor pipe free": dataclasses.replace(costs, pipe_share={}),
             "codes issued twice as fast": dataclasses.replace(costs, issue=costs.issue / 2)}  # fmt: skip
    return {
        name: (timing.program_time("bf16", [16], c), timing.program_time("fp8 boundary order", [16], c))
        for name, c in cases.items()
    }


def nelder_mead(f, x0: list[float], iterations: int) -> list[float]:  # type: ignore[no-untyped-def]
    simplex = [x0] + [[v * (1.25 if i == k else 1.0) + (1e-6 if i == k else 0.0) for i, v in enumerate(x0)]
                      for k in range(len(x0))]  # fmt: skip
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = sorted(range(len(simplex)), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centre = [sum(c) / (len(simplex) - 1) for c in zip(*simplex[:-1], strict=True)]
        towards = [c + (c - w) for c, w in zip(centre, simplex[-1], strict=True)]
        f_towards = f(towards)
        if f_towards < values[0]:
            further = [c + 2 * (c - w) for c, w in zip(centre, simplex[-1], strict=True)]
            f_further = f(further)
            simplex[-1], values[-1] = (further, f_further) if f_further < f_towards else (towards, f_towards)
        elif f_towards < values[-2]:
            simplex[-1], values[-1] = towards, f_towards
        else:
            inside = [c + 0.5 * (w - c) for c, w in zip(centre, simplex[-1], strict=True)]
            f_inside = f(inside)
            if f_inside < values[-1]:
                simplex[-1], values[-1] = inside, f_inside
            else:
                simplex = [simplex[0]] + [[b + 0.5 * (v - b) for b, v in zip(simplex[0], x, strict=True)]
                                          for x in simplex[1:]]  # fmt: skip
                values = [values[0]] + [f(x) for x in simplex[1:]]
    return simplex[min(range(len(simplex)), key=values.__getitem__)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--joint", action="store_true", help="fit both sets, a cost a program free as well")
    args = parser.parse_args()
    c = timing.H100_B64_H64
    start = [c.mma["score"], c.work["softmax"], c.work["exp"], c.work["convert_left"], c.latency, c.issue,
             c.bandwidth, c.pipe_share["convert_left"]]  # fmt: skip
    moved = [v * 1.2 for v in start] + ([5.0] if args.joint else [])
    fit_on = SETS if args.joint else SETS[:1]
    x = nelder_mead(lambda v: error(v, fit_on), moved, args.iterations)
    for name, v in zip(NAMES, x, strict=False):
        print(f"{name:12s} {v:.4g}")
    fitted = costs_of(x)
    for items, probes in SETS:
        print(f"\n{len(items)} item(s) a program: rms relative error {error(x, [(items, probes)]):.3f}")
        for row, probe, measured in probes:
            model = timing.program_time(row, items, fitted, probe)
            print(f"  {row:20s} probe {probe}: measured {measured:6.1f} us, model {model:6.1f}")
    print("\none program of 16 pairs: BF16 rows, V4 FP8 in the boundary order (us)")
    for name, (bf16, fp8) in changes(fitted).items():
        print(f"  {name:40s} {bf16:6.1f} {fp8:6.1f}")


if __name__ == "__main__":
    main()
