"""pytest configuration: the tests import `reference` from this folder and `flashsteps` from
wherever it is installed (CTest puts the build tree's python/ first on PYTHONPATH)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def pytest_report_header(config):
    import flashsteps

    build = os.environ.get("FLASHSTEPS_BUILD_DIR", "(not set: the runner comparisons skip)")
    return [f"flashsteps from {os.path.dirname(flashsteps.__file__)}",
            f"FLASHSTEPS_BUILD_DIR {build}"]
