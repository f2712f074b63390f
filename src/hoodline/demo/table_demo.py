"""Table demo: create a Hudi copy-on-write table, insert, upsert, delete, and verify with hudi-rs.

Runs on embedded data (no network): 20,000 trips over three regions are inserted, 5,000 are
upserted (half updates, half new), 1,000 deleted. After every commit the table is read back with
hoodline and with hudi-rs (snapshot, time travel and incremental reads must agree), and the final
rows are checked against what the operations should have produced. Returns 0 on success.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hoodline.table.properties import IndexType, TableConfig
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.table.write.operation import WriteOperation

REGIONS = np.array(["americas", "asia", "europe"])


def _trips(ids: np.ndarray, version: int, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "trip_id": pa.array(ids.astype(np.int64)),
            "region": pa.array(REGIONS[ids % len(REGIONS)]),
            "rider": pa.array([f"rider-{i % 997:03d}" for i in ids.tolist()]),
            "fare": pa.array(np.round(rng.uniform(3, 80, n), 2)),
            "version": pa.array(np.full(n, version, dtype=np.int64)),
        }
    )


def _expected(ops: list[tuple[WriteOperation, pa.Table]]) -> dict[int, tuple[float, int]]:
    model: dict[int, tuple[float, int]] = {}
    for kind, batch in ops:
        ids = batch["trip_id"].to_pylist()
        if kind is WriteOperation.DELETE:
            for i in ids:
                model.pop(i, None)
        else:
            for i, fare, ver in zip(
                ids, batch["fare"].to_pylist(), batch["version"].to_pylist(), strict=True
            ):
                model[i] = (fare, ver)
    return model


def _oracle_check(table: HudiTable) -> tuple[bool, str]:
    try:
        from hoodline.testing.hudi_oracle import OracleMismatch, assert_hudi_matches_hoodline
    except ImportError as exc:  # pragma: no cover - hudi is a dev dependency
        return False, f"hudi-rs is not installed ({exc}); pip install 'hoodline[demo]'"
    try:
        report = assert_hudi_matches_hoodline(table)
    except OracleMismatch as exc:
        return False, str(exc)
    except Exception as exc:
        return False, f"hudi-rs could not read the table: {exc!r}"
    return True, f"{len(report.checks)} reads agree ({report.rows_latest} rows)"


def run_table_demo(path: str | None, console: Console, keep: bool = False) -> int:
    """Run the demo with its table at ``path``/trips (as the stream demo, ``path`` is the
    output folder: new or empty; a new temporary folder if None, removed at the end unless
    ``keep``); 0 when hudi-rs agrees."""
    if importlib.util.find_spec("hudi") is None:
        console.print("the demo verifies the table with hudi-rs, which is not installed: "
                      "pip install 'hoodline[demo]' (./dev installs it)", style="red",
                      markup=False, highlight=False)
        return 1
    if path is not None and Path(path).exists() and any(Path(path).iterdir()):
        console.print(f"[red]'{escape(path)}' is not empty; choose a new folder for the demo "
                      f"output[/red]")
        return 2
    folder = Path(path) if path else Path(tempfile.mkdtemp(prefix="hoodline-demo-"))
    try:
        return _run(folder / "trips", console)
    finally:
        if path is None and not keep:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            console.print(f"output kept in {escape(str(folder))}")


def _run(base: Path, console: Console) -> int:
    rng = np.random.default_rng(7)
    config = TableConfig(
        name="trips",
        record_key_fields=("trip_id",),
        partition_fields=("region",),
        precombine_field="version",
        index_type=IndexType.BLOOM,
    )
    table = HudiTable.create(base, config)
    console.print(f"[bold]hoodline table demo[/bold] — Hudi copy-on-write table at "
                  f"{escape(str(base))}")

    inserts = _trips(np.arange(20_000), 1, rng)
    upserts = _trips(np.arange(17_500, 22_500), 2, rng)
    deletes = pa.table({"trip_id": pa.array(np.arange(0, 3_000, 3), pa.int64())})
    deletes = deletes.append_column(
        "region", pa.array(REGIONS[deletes["trip_id"].to_numpy() % len(REGIONS)])
    )
    summary = Table(title="commits")
    for col in ("instant", "operation", "records in", "files written", "seconds", "hudi-rs"):
        summary.add_column(col, no_wrap=True)
    ok = True
    done: list[tuple[WriteOperation, pa.Table]] = []
    with WriteClient(table) as client:
        steps: list[tuple[WriteOperation, pa.Table, Callable[..., str]]] = [
            (WriteOperation.INSERT, inserts, client.insert),
            (WriteOperation.UPSERT, upserts, client.upsert),
            (WriteOperation.DELETE, deletes, client.delete),
        ]
        for kind, batch, fn in steps:
            started = time.perf_counter()
            ts = fn(batch)
            elapsed = time.perf_counter() - started
            done.append((kind, batch))
            md = table.timeline.read_commit_metadata(table.timeline.completed_commits()[-1])
            agree, note = _oracle_check(table)
            ok = ok and agree
            summary.add_row(
                ts,
                md.operation_type,
                f"{batch.num_rows:,}",
                str(len(md.write_stats())),
                f"{elapsed:.2f}",
                "[green]agrees[/green]" if agree else f"[red]DISAGREES[/red] {escape(note)}",
            )
    console.print(summary)

    ours = read_snapshot(table, columns=["trip_id", "fare", "version"])
    got = {r["trip_id"]: (r["fare"], r["version"]) for r in ours.to_pylist()}
    want = _expected(done)
    content_ok = got == want and ours.num_rows == len(want)
    ok = ok and content_ok
    second = pc.equal(ours["version"], 2)
    at_two = int(pc.sum(second).as_py() or 0)
    new = int(pc.sum(pc.and_(second, pc.greater_equal(ours["trip_id"], inserts.num_rows)))
              .as_py() or 0)
    console.print(
        f"rows: {ours.num_rows:,} (expected {len(want):,}); at version 2: {at_two:,} "
        f"({at_two - new:,} updated, {new:,} new); "
        f"content {'[green]as expected[/green]' if content_ok else '[red]WRONG[/red]'}"
    )
    if ok:
        console.print("[green bold]OK[/green bold]: hoodline and hudi-rs read the same table")
        return 0
    console.print("[red bold]FAILED[/red bold]: see the rows above")
    return 1
