"""Hypothesis profiles (README, "Tests"). The default suite runs under `gate`: derandomized,
so every run tries the same examples, its time depends on the machine and not on the
draw, and a failure reproduces as it is. `pytest --hypothesis-profile explore` draws
fresh examples each run, keeping failures in the example database, to look for new ones."""
from hypothesis import settings

settings.register_profile("gate", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("gate")  # (`--hypothesis-profile` loads its own after this)
