"""The archive of the hoodline package shipped to executors, and its cache (no JVM here)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hoodline.spark import package_archive as pa_mod
from hoodline.spark.package_archive import build_archive, package_key, shipped_archive


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A session's scratch directory (the cache is ``tmp_path / "cache"``)."""
    path = tmp_path / "scratch"
    path.mkdir()
    return path


def test_package_archive_contains_importable_hoodline(tmp_path: Path) -> None:
    archive = build_archive(tmp_path / "h.zip")
    with zipfile.ZipFile(archive) as zf:
        names = set(zf.namelist())
    assert "hoodline/__init__.py" in names
    assert "hoodline/formats/json_decoder.py" in names
    assert not any("__pycache__" in n for n in names)
    # every folder with modules is a regular package inside the zip (zipimport needs that)
    folders = {n.rsplit("/", 1)[0] for n in names if n.endswith(".py")}
    assert all(f"{f}/__init__.py" in names for f in folders)
    # bytecode beside every source, so workers never compile
    sources = {n for n in names if n.endswith(".py")}
    assert {n[:-1] for n in names if n.endswith(".pyc")} == sources


def test_workers_import_hoodline_from_the_archive_without_compiling(
    tmp_path: Path, scratch: Path
) -> None:
    # through the cache, as sessions ship it
    archive = shipped_archive(scratch, tmp_path / "cache")
    code = f"""
import builtins, sys
sys.path.insert(0, {str(archive)!r})
compiled = []
real = builtins.compile
builtins.compile = lambda *a, **k: compiled.append(a[1]) or real(*a, **k)
import hoodline.pipeline.tasks, hoodline.connectors.kafka.plugin, hoodline.spark.job
assert hoodline.pipeline.tasks.__file__.startswith({str(archive)!r}), hoodline.__file__
print(len(compiled), [c for c in compiled if "hoodline" in str(c)][:3])
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.split(" ", 1)
    assert out[1].strip() == "[]", out


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    built: list[Path] = []
    real = pa_mod.build_archive

    def counting(dest: Path, root: Path | None = None) -> Path:
        built.append(dest)
        return real(dest, root)

    monkeypatch.setattr(pa_mod, "build_archive", counting)
    return built


def test_cached_archive_is_built_once_and_shipped_as_unique_copies(
    tmp_path: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _count_builds(monkeypatch)
    cache = tmp_path / "cache"
    first = shipped_archive(scratch, cache)
    second = shipped_archive(scratch, cache)
    assert len(built) == 1, built  # the second start compiled nothing
    assert first != second and first.parent == second.parent == scratch
    assert first.read_bytes() == second.read_bytes()
    cached = list(cache.glob("hoodline-package-*.zip"))
    assert [p.name for p in cached] == [f"hoodline-package-{package_key()}.zip"]
    assert not list(cache.glob(".*.tmp"))  # no half-written archive left behind


def test_another_package_version_gets_its_own_archive_and_old_ones_are_pruned(
    tmp_path: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _count_builds(monkeypatch)
    cache = tmp_path / "cache"
    versions = [f"v{i}" for i in range(pa_mod.KEEP_OTHERS + 3)]
    for v in versions:
        monkeypatch.setattr(pa_mod, "package_key", lambda v=v: v)
        shipped_archive(scratch, cache)
    assert len(built) == len(versions)
    left = {p.name for p in cache.glob("hoodline-package-*.zip")}
    assert f"hoodline-package-{versions[-1]}.zip" in left  # the one in use
    assert len(left) == pa_mod.KEEP_OTHERS + 1


def test_package_key_follows_every_file_of_the_package(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("x = 1\n")
    (root / "sub" / "m.py").write_text("y = 2\n")
    before = package_key(root)
    assert package_key(root) == before
    (root / "sub" / "m.py").write_text("y = 23\n")  # another size
    changed = package_key(root)
    assert changed != before
    (root / "sub" / "n.py").write_text("")  # a new module
    added = package_key(root)
    assert added not in (before, changed)
    (root / "__pycache__").mkdir()  # Python writing bytecode into the folder: same package
    (root / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"x")
    assert package_key(root) == added


def test_unusable_cache_falls_back_to_building_in_scratch(
    tmp_path: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _count_builds(monkeypatch)
    not_a_dir = tmp_path / "cache"
    not_a_dir.write_text("a file where the cache directory should be")
    archive = shipped_archive(scratch, not_a_dir)
    assert archive.parent == scratch and zipfile.is_zipfile(archive)
    assert built[-1] == archive
