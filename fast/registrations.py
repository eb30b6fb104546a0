"""Registers the project's fast implementations with the contract's registry (``properties.registry``).

Each area module registers its own kernels on import; an area whose optional dependency (Triton) is missing is
skipped, so the torch implementations still register.
"""

from __future__ import annotations

import importlib

AREA_MODULES = ("fast.compression.register", "fast.indexing.register", "fast.cache.register")

for _name in AREA_MODULES:
    try:
        importlib.import_module(_name)
    except ModuleNotFoundError as _err:
        if _err.name != _name and _err.name not in {"triton", *_name.rsplit(".", 1)[:1]}:
            raise
