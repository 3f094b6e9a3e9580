"""A wheel built from the repository is complete: it installs into a fresh
virtualenv, runs, and carries the shipped themes; and every third-party module
the code imports is a declared dependency.

The wheel is built from a copy of what it is made of (so nothing of a previous
build in the working tree can slip in), with ``pip wheel --no-deps``: only the
build backend may come from the package index. The fresh virtualenv gets
kbtui from the wheel alone; its dependencies are this environment's, already
installed, so nothing else is downloaded.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
PACKAGES = ("kbtui", "actors", "store", "themes")
SHIPPED_THEMES = {"kbtui-dark", "kbtui-light", "kbtui-high-contrast"}

LOAD_THEMES = """
import json, sys
from pathlib import Path
import kbtui, themes
from kbtui.tui.theming import load_themes, theme_dirs
found, problems = load_themes(theme_dirs(Path(sys.argv[1])))
print(json.dumps({"kbtui": kbtui.__file__, "themes": themes.__file__,
                  "names": sorted(t.name for t in found), "problems": len(problems)}))
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions() -> set[str]:
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {canonical(re.match(r"[A-Za-z0-9._-]+", spec).group(0)) for spec in project["dependencies"]}


def third_party_imports() -> dict[str, set[str]]:
    """Top-level modules imported anywhere in the packages (not the standard
    library, not the project's own), with the files that import them."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (PROJECT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in PACKAGES:
                        found.setdefault(top, set()).add(str(path.relative_to(PROJECT)))
    return found


def test_every_third_party_import_is_a_declared_dependency():
    declared = declared_distributions()
    providers = importlib.metadata.packages_distributions()
    undeclared = {}
    for module, files in sorted(third_party_imports().items()):
        distributions = providers.get(module, [])
        assert distributions, f"{module} (imported by {sorted(files)}) comes from no installed distribution"
        if not any(canonical(d) in declared for d in distributions):
            undeclared[module] = sorted(distributions)
    assert undeclared == {}, "imported but not in [project] dependencies"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(PROJECT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(PROJECT / package, source / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(work / "dist"), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (path,) = (work / "dist").glob("kbtui-*.whl")
    return path


def test_the_wheel_holds_every_package_and_the_shipped_themes(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in PACKAGES:
        for init in (PROJECT / package).rglob("__init__.py"):
            assert init.relative_to(PROJECT).as_posix() in names
    assert {f"themes/{name}.toml" for name in SHIPPED_THEMES} <= names
    assert {"store/migrations/m0001_initial.py"} <= names


def test_the_installed_wheel_runs_and_loads_its_themes(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "--quiet", str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    # The dependencies: this environment's site-packages, after the venv's own.
    # Only its paths are added (its .pth files do not run), so this checkout's
    # editable install stays out: kbtui and the themes come from the wheel alone.
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    Path(site, "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["KBTUI_HOME"] = str(tmp_path / "home")

    help_run = subprocess.run(
        [str(venv / "bin" / "kbtui"), "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert help_run.returncode == 0, help_run.stderr[-2000:]
    assert "Usage: kbtui" in help_run.stdout

    loaded = subprocess.run(
        [str(python), "-c", LOAD_THEMES, str(tmp_path / "home")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    report = json.loads(loaded.stdout)
    assert Path(report["kbtui"]).is_relative_to(venv) and Path(report["themes"]).is_relative_to(venv)
    assert report["names"] == sorted(SHIPPED_THEMES) and report["problems"] == 0
