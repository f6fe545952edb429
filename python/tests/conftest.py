"""pytest configuration: the tests import `reference` from this folder and `flashsteps` from
wherever it is installed (CTest puts the build tree's python/ first on PYTHONPATH). PyTorch is
required, not optional: its autograd, torch.library and torch.compile paths are tested here on the
emulator, and no test is skipped for its absence."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def pytest_configure(config):
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise pytest.UsageError(
            f"python/tests need PyTorch ({e}): tests/install-deps.sh installs it into build/venv "
            "(the cpu preset's Python); elsewhere, pip install torch") from e


def pytest_report_header(config):
    import flashsteps

    build = os.environ.get("FLASHSTEPS_BUILD_DIR", "(not set: the runner comparisons skip)")
    return [f"flashsteps from {os.path.dirname(flashsteps.__file__)}",
            f"FLASHSTEPS_BUILD_DIR {build}"]
