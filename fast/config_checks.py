"""Field checks for the kernels' launch configurations (frozen dataclasses call them from ``__post_init__``), so a
bad tile is refused when the configuration is made, with the field's name and rule, not at the launch."""

from __future__ import annotations


def powers_of_two(config: object, *names: str) -> None:
    """Each field in ``names`` is an int power of two >= 1 (a tile or a warp count), else ``ValueError``."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or value < 1 or value & (value - 1):
            raise ValueError(f"{name}: must be a power of two >= 1 (a tile or warp count), got {value!r}")


def at_least(config: object, **least: int) -> None:
    """Each field named in ``least`` is an int at least its bound, else ``ValueError``."""
    for name, bound in least.items():
        value = getattr(config, name)
        if not isinstance(value, int) or value < bound:
            raise ValueError(f"{name}: must be an int >= {bound}, got {value!r}")
