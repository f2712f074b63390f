"""A minimal pipeline file reading JSON-lines files into a table, for tests of how a run
starts (or refuses to)."""

from __future__ import annotations

from pathlib import Path


def write_files_pipeline(path: Path, source: Path | str, table: Path | str,
                         schema: dict[str, str], extra: str = "", table_lines: str = "") -> Path:
    """``path`` written with a files source at ``source`` (a local folder is created), a table
    at ``table`` keyed by ``id`` with ``table_lines`` in its section, the ``[schema]`` and
    ``extra`` TOML appended; returns ``path``."""
    if isinstance(source, Path):
        source.mkdir(parents=True, exist_ok=True)
    fields = "\n".join(f'{name} = "{kind}"' for name, kind in schema.items())
    path.write_text(f"""
[source]
type = "files"
[source.options]
path = "{source}"
format = "jsonl"
[table]
path = "{table}"
record-key = ["id"]
{table_lines}
[schema]
{fields}
{extra}
""")
    return path
