"""House rules as import-linter contracts (pyproject.toml): store/ imports
nothing from kbtui/ or actors/; store/, actors/ and the agent tools never
import the UI."""

import shutil
import subprocess
import sys
from pathlib import Path


def test_import_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is a test dependency"
    result = subprocess.run([lint], cwd=Path(__file__).parents[1], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
