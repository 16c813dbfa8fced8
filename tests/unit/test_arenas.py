"""The operator asks glibc for one malloc arena (memory flat under churn); elsewhere, nothing."""

from __future__ import annotations

import platform
import subprocess
import sys

from caldera.operator.arenas import one_arena


def test_one_arena_is_taken_on_glibc_and_refused_quietly_elsewhere() -> None:
    # in a fresh interpreter: mallopt is process-wide
    code = "from caldera.operator.arenas import one_arena; print(one_arena())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == str(platform.libc_ver()[0] == "glibc")


def test_asking_again_is_harmless() -> None:
    assert one_arena() == one_arena()
