"""hudi-rs (PyPI ``hudi``) as the test oracle for hoodline tables.

Helpers read a table with hudi-rs and compare with hoodline's own reads (or any expected Arrow
table), ignoring row order: rows are matched by key columns and differences are reported by key.

Typical use in a test::

    from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline
    assert_hudi_matches_hoodline(table)            # snapshot, every as-of, every incremental range

    expected = pa.table({...})
    assert_rows_equal(expected, hudi_snapshot(table.base_path, columns=[...]), key=("id",))
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

ZERO_TS = "00000000000000000"
DEFAULT_KEY = ("_hoodie_partition_path", "_hoodie_record_key")


def _hudi() -> Any:
    try:
        import hudi
    except ImportError as exc:  # pragma: no cover - dev dependency
        raise RuntimeError("the 'hudi' package (hudi-rs) is needed for oracle checks") from exc
    return hudi


def hudi_table(path: str | os.PathLike[str]) -> Any:
    """A freshly built hudi-rs table (no caching between calls); an object store path is read
    with its storage options."""
    from hoodline.storage.paths import ObjectPath

    builder = _hudi().HudiTableBuilder.from_base_uri(str(path))
    if isinstance(path, ObjectPath):
        builder = builder.with_storage_options(path.root.reader_options())
    return builder.build()


def _to_table(batches: list[pa.RecordBatch], table: Any) -> pa.Table:
    if batches:
        return pa.Table.from_batches(batches)
    try:
        return pa.schema(table.get_schema_with_meta_fields()).empty_table()
    except Exception:  # hudi-rs has no schema before the first commit
        from hoodline.table.schema import META_SCHEMA

        return META_SCHEMA.empty_table()


def hudi_snapshot(
    path: str | os.PathLike[str],
    as_of: str | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Snapshot (or time travel with ``as_of``) read by hudi-rs."""
    hudi = _hudi()
    t = hudi_table(path)
    opts = hudi.HudiReadOptions()
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    if columns is not None:
        opts = opts.with_projection(list(columns))
    return _to_table(t.read(opts), t)


def hudi_incremental(path: str | os.PathLike[str], start: str, end: str | None = None) -> pa.Table:
    """Incremental read ``(start, end]`` by hudi-rs."""
    hudi = _hudi()
    t = hudi_table(path)
    opts = hudi.HudiReadOptions().with_query_type(hudi.HudiQueryType.Incremental)
    opts = opts.with_start_timestamp(start)
    if end is not None:
        opts = opts.with_end_timestamp(end)
    return _to_table(t.read(opts), t)


def hudi_completed_commits(path: str | os.PathLike[str]) -> list[str]:
    """Timestamps of completed data instants (commit, deltacommit, replacecommit) per hudi-rs."""
    tl = hudi_table(path).get_timeline()
    found = [
        *tl.get_completed_commits(),
        *tl.get_completed_deltacommits(),
        *tl.get_completed_replacecommits(),
    ]
    return sorted(i.timestamp for i in found)


def hudi_latest_extra_metadata(path: str | os.PathLike[str], key: str) -> str | None:
    """``extraMetadata[key]`` of the newest completed commit carrying it, read via hudi-rs."""
    import json

    tl = hudi_table(path).get_timeline()
    for inst in tl.get_completed_commits(desc=True):
        value = json.loads(tl.get_instant_metadata_in_json(inst)).get("extraMetadata", {}).get(key)
        if value is not None:
            return str(value)
    return None


def slice_label(base_file: str | None, log_files: Sequence[str]) -> str:
    """One file slice as text: its base file, then `` + <log file>`` per log file."""
    return (base_file or "") + "".join(f" + {f}" for f in log_files)


def hudi_file_slices(path: str | os.PathLike[str], as_of: str | None = None) -> list[str]:
    """The file slices hudi-rs would read (:func:`slice_label`, sorted)."""
    hudi = _hudi()
    opts = hudi.HudiReadOptions()
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    out = []
    for s in hudi_table(path).get_file_slices(opts):
        base = s.base_file_relative_path() if s.base_file_name else None
        logs = sorted(s.log_files_relative_paths()) if s.has_log_files else []
        out.append(slice_label(base, logs))
    return sorted(out)


# -- comparison ----------------------------------------------------------------------------------
def _loose_type(t: pa.DataType) -> pa.DataType:
    """Type with nested nullability flags removed (readers differ only in those)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(_loose_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _loose_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_loose_type(t.key_type), _loose_type(t.item_type))
    return t


def _loosen(table: pa.Table) -> pa.Table:
    schema = pa.schema([pa.field(f.name, _loose_type(f.type)) for f in table.schema])
    return table.cast(schema) if schema != table.schema else table


class OracleMismatch(AssertionError):
    """hudi-rs and hoodline (or an expected table) disagree."""


def _fmt_row(row: dict[str, Any], limit: int = 8) -> str:
    items = list(row.items())
    shown = ", ".join(f"{k}={v!r}" for k, v in items[:limit])
    return "{" + shown + (", ..." if len(items) > limit else "") + "}"


def assert_rows_equal(
    expected: pa.Table,
    actual: pa.Table,
    key: Sequence[str] = DEFAULT_KEY,
    label: str = "",
    columns: Sequence[str] | None = None,
    check_types: bool = True,
) -> None:
    """Assert both tables hold the same rows (any order), matched by ``key`` columns.

    ``columns`` restricts the comparison; otherwise column names (and, with ``check_types``,
    types ignoring nullability) must be equal. Raises :class:`OracleMismatch` listing the keys
    missing on either side and the first rows whose values differ.
    """
    where = f" [{label}]" if label else ""
    if columns is not None:
        for name, tbl in (("expected", expected), ("actual", actual)):
            missing = [c for c in columns if c not in tbl.column_names]
            if missing:
                raise OracleMismatch(f"{name} lacks columns {missing}{where}")
        expected, actual = expected.select(list(columns)), actual.select(list(columns))
    if expected.column_names != actual.column_names:
        raise OracleMismatch(
            f"columns differ{where}:\n  expected {expected.column_names}\n"
            f"  actual   {actual.column_names}"
        )
    expected, actual = _loosen(expected), _loosen(actual)
    if check_types and expected.schema != actual.schema:
        type_diffs = [
            f"  {e.name}: expected {e.type}, actual {a.type}"
            for e, a in zip(expected.schema, actual.schema, strict=True)
            if e.type != a.type
        ]
        raise OracleMismatch(f"column types differ{where}:\n" + "\n".join(type_diffs))
    if not check_types:
        actual = actual.cast(expected.schema)
    for k in key:
        if k not in expected.column_names:
            raise OracleMismatch(f"key column '{k}' not in compared columns{where}")

    def by_key(tbl: pa.Table) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
        out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for r in tbl.to_pylist():
            out.setdefault(tuple(r[k] for k in key), []).append(r)
        return out

    exp_by_key, act_by_key = by_key(expected), by_key(actual)
    problems: list[str] = []
    only_exp = sorted(set(exp_by_key) - set(act_by_key), key=repr)
    only_act = sorted(set(act_by_key) - set(exp_by_key), key=repr)
    if only_exp:
        problems.append(f"{len(only_exp)} key(s) missing from actual, e.g. {only_exp[:5]}")
    if only_act:
        problems.append(f"{len(only_act)} unexpected key(s) in actual, e.g. {only_act[:5]}")
    diffs: list[str] = []
    for kv in sorted(set(exp_by_key) & set(act_by_key), key=repr):
        e_rows, a_rows = exp_by_key[kv], act_by_key[kv]
        if len(e_rows) != len(a_rows):
            diffs.append(f"key {kv}: expected {len(e_rows)} row(s), actual {len(a_rows)}")
            continue
        if len(e_rows) == 1:
            e, a = e_rows[0], a_rows[0]
            if e != a:
                cols = [c for c in e if e[c] != a[c]]
                diffs.append(
                    f"key {kv} differs in {cols}:\n    expected {_fmt_row(e)}\n"
                    f"    actual   {_fmt_row(a)}"
                )
        elif sorted(map(repr, e_rows)) != sorted(map(repr, a_rows)):
            diffs.append(f"key {kv}: the {len(e_rows)} rows with this key differ")
    if diffs:
        problems.append(f"{len(diffs)} key(s) differ, first:\n  " + "\n  ".join(diffs[:3]))
    if problems:
        raise OracleMismatch(
            f"rows differ{where} (expected {expected.num_rows} rows, actual {actual.num_rows}):\n"
            + "\n".join(problems)
        )


def assert_unique_keys(table: pa.Table, key: Sequence[str] = DEFAULT_KEY, label: str = "") -> None:
    """No two live rows share a key (a Hudi table invariant for upserts)."""
    if table.num_rows == 0:
        return
    counts = table.group_by(list(key)).aggregate([([], "count_all")])
    dups = counts.filter(pa.compute.greater(counts.column("count_all"), 1))
    if dups.num_rows:
        where = f" [{label}]" if label else ""
        raise OracleMismatch(
            f"{dups.num_rows} key(s) have more than one live row{where}, e.g. "
            f"{dups.slice(0, 5).to_pylist()}"
        )


@dataclass
class OracleReport:
    """What :func:`assert_hudi_matches_hoodline` compared."""

    commits: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    rows_latest: int = 0


def assert_hudi_matches_hoodline(
    table: Any,
    time_travel: bool = True,
    incremental: bool = True,
    max_commits: int | None = None,
) -> OracleReport:
    """hudi-rs and hoodline agree on ``table`` (a :class:`hoodline.table.table.HudiTable`).

    Compares the completed-commit list, the latest snapshot and file list, and optionally a time
    travel read at every completed commit and incremental reads between consecutive commits plus
    ``(0, latest]`` (``max_commits`` limits this to the newest commits).
    """
    from hoodline.table import read

    path = table.base_path
    table.timeline.reload()
    ours_commits = [i.timestamp for i in table.timeline.completed_commits()]
    theirs_commits = hudi_completed_commits(path)
    report = OracleReport(commits=ours_commits)
    if ours_commits != theirs_commits:
        raise OracleMismatch(
            f"completed commits differ:\n  hoodline {ours_commits}\n  hudi-rs  {theirs_commits}"
        )
    ours = read.read_snapshot(table)
    assert_rows_equal(hudi_snapshot(path), ours, label="snapshot")
    assert_unique_keys(ours, label="snapshot")
    report.rows_latest = ours.num_rows
    report.checks.append("snapshot")
    our_files = sorted(
        slice_label(s.base_file, sorted(s.log_files)) for s in read.file_slices(table)
    )
    their_files = hudi_file_slices(path)
    if our_files != their_files:
        raise OracleMismatch(
            f"latest file slices differ:\n  hoodline {our_files}\n  hudi-rs  {their_files}"
        )
    checked = ours_commits if max_commits is None else ours_commits[-max_commits:]
    if time_travel:
        for ts in checked:
            assert_rows_equal(
                hudi_snapshot(path, as_of=ts),
                read.read_snapshot(table, as_of=ts),
                label=f"as of {ts}",
            )
            report.checks.append(f"as_of {ts}")
    if incremental and ours_commits:
        bounds = [ZERO_TS, *ours_commits]
        pairs = list(itertools.pairwise(bounds))
        if max_commits is not None:
            pairs = pairs[-max_commits:]
        pairs.append((ZERO_TS, ours_commits[-1]))
        from hoodline.table.archive import has_archived_instants

        if has_archived_instants(table):
            # hudi-rs reads only commits of the active timeline; hoodline (as Java) scans every
            # file group for a range that starts among archived commits
            pairs = [(s, e) for s, e in pairs if s >= ours_commits[0]]
        for start, end in pairs:
            assert_rows_equal(
                hudi_incremental(path, start, end),
                read.read_incremental(table, start, end),
                label=f"incremental ({start}, {end}]",
            )
            report.checks.append(f"incremental ({start}, {end}]")
    return report
