"""Dependencies point one way: only ``hoodline.spark`` (and the CLI, which starts it) imports
pyspark or ``hoodline.spark``; the engine-agnostic core reaches Spark only through the engine
registry's import string."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import SRC

PACKAGE = SRC / "hoodline"
# The only modules allowed to import Spark: the Spark engine and the CLI that starts it.
SPARK_SIDE = (PACKAGE / "spark", PACKAGE / "cli.py")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _spark_imports(path: Path) -> set[str]:
    return {
        name
        for name in _imports(path)
        if name.split(".")[0] == "pyspark" or name.startswith("hoodline.spark")
    }


def test_only_the_spark_engine_and_the_cli_import_spark() -> None:
    offenders = {
        str(path.relative_to(SRC)): sorted(found)
        for path in sorted(PACKAGE.rglob("*.py"))
        if not any(path == side or side in path.parents for side in SPARK_SIDE)
        and (found := _spark_imports(path))
    }
    assert offenders == {}


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from pyspark.sql import SparkSession\n    import hoodline.spark.job\n"
    )
    assert _spark_imports(module) == {"pyspark.sql", "hoodline.spark.job"}


def test_importing_hoodline_loads_no_pandas() -> None:
    """No module converts a Python value through pyarrow at import: pyarrow's first conversion
    imports pandas (~0.3 s and ~55 MiB), which every CLI command and driver would pay."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import hoodline\n"
        "for m in pkgutil.walk_packages(hoodline.__path__, 'hoodline.'):\n"
        "    importlib.import_module(m.name)\n"
        "    if 'pandas' in sys.modules:\n"
        "        print(m.name)\n"
        "        break\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "", f"importing {done.stdout.strip()} loaded pandas"
