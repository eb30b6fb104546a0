"""Compression properties: every implementation of compression_prefill and compression_decode against the
exact reference (docs/compression-properties.md names which mutant each one kills).

An example is plain data from ``properties.compression.strategies``; a check builds the tensors on the
implementation's device, replays the example's calls through ``impl.fn`` and compares with the reference
(``properties.compression.checks``): the one-shot rows of each whole sequence, the ring contents that any
later step may read, and the state slots of other requests. Examples per mutant in the hunt:
``properties.compression.checks.HUNT_EXAMPLES``.
"""

from __future__ import annotations

from typing import Any

from properties.compression import props_decode, props_prefill, props_rejects, props_shapes
from properties.compression.call import DECODE, PREFILL
from properties.compression.checks import HUNT_EXAMPLES
from properties.compression.frozen import LIFE_CANCELLATION
from properties.compression.request_life import replay_life
from properties.compression.strategies import request_lives
from properties.registry import Implementation
from properties.runner import Property


def request_life(impl: Implementation, ex: dict[str, Any]) -> None:
    replay_life(impl, ex)


LIFE = [
    Property(
        "compression_prefill_request_life",
        PREFILL,
        request_lives(),
        request_life,
        doc="A whole schedule (new requests over used slots, prefill chunks, verify steps with rollback) "
        "through this prefill and its decode twin (or the reference's): rows and rings equal the exact "
        "model after every call (properties/compression/request_life.py).",
        examples=(LIFE_CANCELLATION,),
        hunt_examples=HUNT_EXAMPLES,
    ),
    Property(
        "compression_decode_request_life",
        DECODE,
        request_lives(),
        request_life,
        doc="As compression_prefill_request_life, driving this decode (and its prefill twin or the reference's).",
        hunt_examples=HUNT_EXAMPLES,
    ),
]

PROPERTIES = [
    *props_prefill.PROPERTIES,
    props_rejects.PROPERTIES[0],
    LIFE[0],
    *props_decode.PROPERTIES,
    props_rejects.PROPERTIES[1],
    LIFE[1],
    *props_shapes.PROPERTIES,
]
