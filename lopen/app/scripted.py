"""`lopen run <module> --playbook FILE`: the scripted model started for one run, and the run pointed at it.

The playbook's first model is the main model (requirements, planning, building, research), its second
— when it names one — the oracle's. The server answers on a loopback port of this process, from the
run's pre-flight to its end; nothing is written to the environment or the project's configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lopen.errors import LopenError

if TYPE_CHECKING:
    from lopen.scripted_model import ScriptedModelServer

FLAG = "--playbook"


def scripted_overrides(url: str, models: Sequence[str]) -> dict[str, object]:
    """Every session on the scripted model at ``url``: ``models[0]`` for the work, ``models[1]`` (else the
    same) for the oracle, no fallback."""
    main = models[0]
    oracle = models[1] if len(models) > 1 else main
    return {
        "provider.type": "openai",
        "provider.base_url": url,
        "models.requirement_gathering": main,
        "models.planning": main,
        "models.building": main,
        "models.research": main,
        "models.oracle": oracle,
        "models.fallback": [],
    }


def start_scripted(path: Path) -> ScriptedModelServer:
    """The playbook at ``path`` read, checked and served (the caller stops the server); a missing, unreadable or
    invalid file is a ``LopenError`` saying what is wrong in it."""
    from lopen.scripted_model import PlaybookError, ScriptedModelServer, load_playbook

    if path.is_dir():
        raise LopenError(
            f"{FLAG} {path} is a folder",
            "a playbook is one TOML file: the answers the scripted model gives",
            "name the file, e.g. --playbook playbooks/<module>.toml (docs/your-own-playbook.md)",
        )
    try:
        playbook = load_playbook(path)
    except PlaybookError:
        if not path.exists():
            raise LopenError(
                f"no playbook {path}",
                f"{FLAG} names a file that does not exist (looked for {path.resolve()})",
                "check the path; docs/your-own-playbook.md shows how to write one",
            ) from None
        raise  # an invalid playbook: where, and what is wrong there
    return ScriptedModelServer(playbook).start()
