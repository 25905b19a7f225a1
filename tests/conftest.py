"""Shared pytest setup: puts tests/ on sys.path so `from lib import ...`
works from every test folder, and exposes the build directory."""
import os
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from lib import paths  # noqa: E402


@pytest.fixture(scope="session")
def build_dir():
    return paths.build_dir()
