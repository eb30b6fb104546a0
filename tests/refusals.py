"""The one check behind every "refusal worded exactly" table in tests/: each case is a call, the error it must
raise and the whole message it must carry (docs/mutation.md: a refusal's wording is part of the contract)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest

Refusal = tuple[Callable[[], object], type[Exception], str]


def worded_exactly(cases: Sequence[Refusal]) -> Callable[..., None]:
    """A test, parametrized over ``cases``, that each call raises its error with exactly its message."""

    @pytest.mark.parametrize(("call", "error", "message"), cases)
    def test(call: Callable[[], object], error: type[Exception], message: str) -> None:
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            call()

    return test
