"""Shared by the engine tests: import an engine's own code, or fail in CI instead of skipping.

README's test command (what .ci/run runs) installs the engines and sets
MODELPLAN_REQUIRE_ENGINES=1, so a missing engine there is a failure; elsewhere the engine tests
skip with the install command in the reason.
"""

from __future__ import annotations

import importlib
import os

import pytest

INSTALL = "DS_BUILD_OPS=0 pip install -r tests/engines.txt"
REQUIRED = os.environ.get("MODELPLAN_REQUIRE_ENGINES") == "1"


def engine_module(name: str):
    """`import name`, or fail (MODELPLAN_REQUIRE_ENGINES=1) / skip naming the install command."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = f"{name} is not importable ({exc}); install the engines: {INSTALL}"
        if REQUIRED:
            pytest.fail(f"MODELPLAN_REQUIRE_ENGINES=1 (CI) but {message}", pytrace=False)
        pytest.skip(message)
