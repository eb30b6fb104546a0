"""The ``csa`` command line: ``csa bytes``, ``csa fuzz``."""
