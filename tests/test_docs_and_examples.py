"""The README's option reference and the example pipeline files must not rot."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.docs import BEGIN, END, readme_with_reference, render_reference
from hoodline.pipeline.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def test_readme_option_reference_is_current() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme_with_reference(readme, render_reference()) == readme, (
        "README.md's option reference is stale: run `./dev shell python -m hoodline.docs`"
    )


def test_reference_documents_every_option_with_a_description() -> None:
    reference = render_reference()
    for key in ("table.record-key", "scan.split-assigner", "source.mode",
                "hoodie.parquet.max.file.size", "errors.tolerance"):
        assert f"`{key}`" in reference
    for line in reference.splitlines():
        if line.startswith("| `"):
            description = line.rstrip("|").rsplit("|", 1)[-1].strip()
            assert description, f"option without a description: {line}"


def test_readme_markers_are_required() -> None:
    with pytest.raises(ValueError, match="markers"):
        readme_with_reference("no markers here", "x")
    updated = readme_with_reference(f"a\n{BEGIN}\nold\n{END}\nb", "new")
    assert updated == f"a\n{BEGIN}\nnew\n{END}\nb"


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "examples").glob("*.toml")))
def test_example_pipeline_files_are_valid(name: str) -> None:
    config = load_config(ROOT / "examples" / name)
    assert config.table.record_key
    assert config.schema is not None and len(config.schema) > 0
