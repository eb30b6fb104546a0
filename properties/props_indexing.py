"""The indexing area's properties: index scores, valid-prefix top-k, candidate blocks and their restoration.

Each property replays its hand-written examples, then its frozen counterexamples (``properties.frozen_indexing``).
"""

from __future__ import annotations

from properties import props_candidates, props_index_scores, props_topk
from properties.frozen_indexing import with_frozen

PROPERTIES = with_frozen([*props_index_scores.PROPERTIES, *props_topk.PROPERTIES, *props_candidates.PROPERTIES])
