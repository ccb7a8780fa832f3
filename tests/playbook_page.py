"""docs/your-own-playbook.md followed literally — its ```sh blocks, in order, in a fresh folder with an empty
HOME and no configuration, through the real `lopen` — and the helpers for a fresh machine's environment.

The run of the whole page (``follow(…, with_engine=True)``) builds module ``greet`` (two components, two
task commits) with `lopen run greet --playbook …`; the session-scoped fixture ``playbook_page_run``
(tests/conftest.py) does it once for every test that needs a module built by a real run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
PLAYBOOK_DOC = REPO / "docs" / "your-own-playbook.md"


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """No git identity, no credentials, no user configuration: a fresh machine."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
        **extra,
    }


def doc_script(with_engine: bool) -> str:
    """The page's ```sh blocks, in order, as one bash script (the run's part only ``with_engine``)."""
    text = PLAYBOOK_DOC.read_text(encoding="utf-8")
    if not with_engine:
        text = re.sub(r"<!-- engine: begin -->.*?<!-- engine: end -->", "", text, flags=re.S)
    blocks = re.findall(r"^```sh\n(.*?)^```$", text, flags=re.S | re.M)
    assert len(blocks) >= 5
    return "set -euo pipefail\n" + "\n".join(blocks)


def follow(folder: Path, with_engine: bool) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The page's commands run in ``folder``; returns what they printed and the project they made."""
    env = clean_env(folder / "home", PYTHONPATH=str(REPO))  # the Lopen beside this page, whatever the venv has
    child = subprocess.Popen(
        ["bash", "-c", doc_script(with_engine)],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err), folder / "greet-project"
