"""Lab 27: score compressed rows, select over the valid prefix, restrict to candidates, translate addresses.

Every printed value comes from ``reference/``. Two query heads (1, 0) and (0, 1) with weights 1 and 2 score five
stored index keys; a query at position 7 with ratio 2 sees only the first four rows. The lab checks its top-2
against every pair of valid rows by total score and checks empty and undersized ranges; it exits 1 if any check
fails. The same lines are written to results/27_indexing.txt.
"""

from __future__ import annotations

import itertools
import pathlib
import sys
from collections.abc import Sequence
from fractions import Fraction

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reference.addressing import rows_to_slots  # noqa: E402
from reference.candidates import CandidateRule, block_scores, kept_blocks, topk_within_blocks  # noqa: E402
from reference.indexing import index_scores, visible_rows  # noqa: E402
from reference.score_values import format_scores  # noqa: E402
from reference.topk import SelectTopK, V41TopK, topk  # noqa: E402

QUERIES = [(1, 0), (0, 1)]
WEIGHTS = [1, 2]
# Scores 2, 6, 3, 0 and 300: (0, 3) scores 2 * 3 = 6, (1, 1) scores 1 + 2 = 3, (-1, -2) is cut to 0 by the ReLU.
KEYS = [(2, 0), (0, 3), (1, 1), (-1, -2), (100, 100)]
RATIO = 2
QUERY_POSITION = 7  # sees rows 0..3; row 4 completes only at position 9
DECODE_POSITION = 9  # sees all five rows
CANDIDATE_BLOCK = 2
RETAINED_BLOCKS = 1
UNPINNED = CandidateRule(pin_newest=False)
GATHER_OFFSET = 10
BLOCK_SIZE = 8  # original positions per allocator block; Bc = 8 / 2 = 4 compressed rows
BLOCK_TABLE = [7, 2]
PADDING_LANE = -1
MINUS_ONE_FILL = SelectTopK(fill=-1, sorted_index=True)

RESULTS = ROOT / "results" / "27_indexing.txt"


def best_pair_total(scores: Sequence[Fraction], valid: int) -> Fraction:
    """The largest total score of any two distinct valid rows, by enumeration."""
    return max(scores[a] + scores[b] for a, b in itertools.combinations(range(valid), 2))


def run() -> tuple[list[str], list[str]]:
    """The printed lines and the failed checks."""
    scores = index_scores(QUERIES, WEIGHTS, KEYS)
    valid = visible_rows(QUERY_POSITION, RATIO)
    failures: list[str] = []

    top2 = topk(scores, valid, 2, V41TopK())
    blocks = block_scores(scores, valid, CANDIDATE_BLOCK, pin_newest=UNPINNED.pin_newest)
    kept = kept_blocks(scores, valid, RETAINED_BLOCKS, CANDIDATE_BLOCK, UNPINNED)
    top2_kept = topk_within_blocks(scores, valid, 2, kept, CANDIDATE_BLOCK)
    undersized = topk(scores, 1, 3, MINUS_ONE_FILL)
    gathered = topk(scores, valid, 2, V41TopK(), offset=GATHER_OFFSET)
    decode_valid = visible_rows(DECODE_POSITION, RATIO)
    decode_rows = (*topk(scores, decode_valid, 3, MINUS_ONE_FILL), PADDING_LANE)
    slots = rows_to_slots(decode_rows, BLOCK_TABLE, BLOCK_SIZE, RATIO)

    lines = [
        f"Scores: {format_scores(scores)} | valid prefix: {valid}",
        f"Top-2 over valid rows: {list(top2)}",
        f"Candidate block scores: {format_scores(blocks)} | retained block: {', '.join(map(str, kept))}",
        f"Top-2 within retained block: {list(top2_kept)}",
        f"One valid row, three output slots: {list(undersized)}",
        f"Prefill at gathered offset {GATHER_OFFSET}: {list(gathered)}",
        f"Decode logical rows: {list(decode_rows)} -> physical slots: {list(slots)}",
    ]

    if any(not 0 <= row < valid for row in top2) or len(set(top2)) != 2:
        failures.append(f"top-2 {top2} is not two distinct rows below the valid prefix {valid}")
    elif sum(scores[row] for row in top2) != best_pair_total(scores, valid):
        failures.append(f"top-2 {top2} does not reach the best pair total {best_pair_total(scores, valid)}")
    if topk(scores, 0, 2, MINUS_ONE_FILL) != (-1, -1):
        failures.append("an empty range must fill every lane with -1")
    if topk(scores, 0, 2, V41TopK()) != (-1, -1):
        failures.append("an empty V4.1 range must give only -1 lanes")
    if undersized != (0, -1, -1):
        failures.append(f"one valid row in three lanes gave {undersized}, expected row 0 then two -1 lanes")
    return lines, failures


def main() -> int:
    lines, failures = run()
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    for failure in failures:
        sys.stderr.write(f"check failed: {failure}\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
