"""Development scripts (``mutate``: mutation testing of the reference, ``make mutate``)."""
