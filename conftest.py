"""Test-session set-up shared by properties/ and tests/: Triton mode and Hypothesis profiles."""

import os
import shutil

if "TRITON_INTERPRET" not in os.environ and shutil.which("nvidia-smi") is None:
    os.environ["TRITON_INTERPRET"] = "1"

from properties.profiles import load_profile

load_profile()
