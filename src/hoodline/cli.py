"""Command-line interface: ``hoodline run|demo|table ...``."""

from __future__ import annotations

import typer

from hoodline import __version__

app = typer.Typer(
    name="hoodline",
    help="Exactly-once streaming ingestion from Kafka and files into Apache Hudi tables.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def version() -> None:
    """Print the hoodline version."""
    typer.echo(__version__)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
