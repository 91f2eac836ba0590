"""What a regular install gets: the wheel built from this checkout, offline.

The suite itself runs on an editable install, which imports straight from the
checkout and so cannot notice a package missing from the wheel. These tests build
the wheel with the installed setuptools (no build isolation, so no network) from a
copy of the tracked files, and import the public packages from it alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ptc", "registry", "runtime", "sdkgen")


def _tracked_files() -> list[str]:
    done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if done.returncode != 0:  # not a git checkout (an sdist): every file there is
        return [
            str(path.relative_to(ROOT))
            for path in ROOT.rglob("*")
            if path.is_file() and ".venv" not in path.parts and "__pycache__" not in path.parts
        ]
    return [name for name in done.stdout.decode().split("\0") if name]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in _tracked_files():
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    build = "import sys, setuptools.build_meta as b;print(b.build_wheel(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", build, str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


def test_the_wheel_holds_every_package_and_its_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = sorted(
        str(init.parent.relative_to(ROOT))
        for package in PACKAGES
        for init in (ROOT / package).rglob("__init__.py")
        if "__pycache__" not in init.parts
    )
    assert "runtime/_testing" in packages  # the one a listed set of packages once missed
    missing = [package for package in packages if f"{package}/__init__.py" not in names]
    assert not missing, f"packages left out of the wheel: {missing}"
    for data in (
        "runtime/_pyodide/worker/worker.js",
        "runtime/_pyodide/worker/bootstrap.py",
        *(f"{package}/py.typed" for package in PACKAGES),
    ):
        assert data in names, data
    assert not {name.split("/")[0] for name in names} & {"tests", "examples"}


def test_the_public_packages_import_from_the_wheel_alone(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import sys;"
        "import ptc, ptc.adapters, ptc.testing, registry, runtime, runtime.testing, sdkgen;"
        "from runtime.testing import check_runtime;"
        "assert all(m.__file__.startswith(sys.argv[1]) for m in "
        "(ptc, registry, runtime, sdkgen, sys.modules['runtime._testing']))"
    )
    # -I: neither the checkout nor the editable install's .pth is on the path; the
    # dependencies come from this environment's site-packages, added after the wheel.
    paths = [str(site), *(p for p in sys.path if p.endswith("site-packages"))]
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path[:0] = {paths!r}; {script}", str(site)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
