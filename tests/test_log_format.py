"""A task's log records in a process nobody configured logging in (a Spark executor's Python
worker) read as the driver's plain lines, not as bare messages."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_task_process_logs_in_the_drivers_format_once() -> None:
    code = ("import logging\n"
            "from hoodline.log_format import ensure_task_logging\n"
            "ensure_task_logging(); ensure_task_logging()\n"
            "logging.getLogger('hoodline.storage.slow').warning('object store: slow')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO / "src")}, timeout=60, check=True)
    assert re.fullmatch(r"\d\d:\d\d:\d\d WARNING hoodline\.storage\.slow: object store: slow\n",
                        done.stderr), done.stderr


def test_configured_logging_is_left_as_it_is() -> None:
    code = ("import logging\n"
            "logging.basicConfig(format='custom %(message)s')\n"
            "from hoodline.log_format import ensure_task_logging\n"
            "ensure_task_logging()\n"
            "logging.getLogger('hoodline.x').warning('kept')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO / "src")}, timeout=60, check=True)
    assert done.stderr == "custom kept\n"
