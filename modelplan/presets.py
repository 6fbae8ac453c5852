"""Find and read the TOML presets shipped with modelplan (models, accelerators, clusters,
training engines).

In a source checkout they live in `<repo>/presets`; an installed wheel carries them as
`modelplan/_presets` (see pyproject's force-include).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from modelplan.errors import PresetNotFound

Category = Literal["models", "accelerators", "clusters", "frameworks"]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
"""What a preset name can look like (a file stem in presets/<category>/)."""


def presets_root() -> Path:
    """The folder holding models/, accelerators/, clusters/ and frameworks/."""
    here = Path(__file__).resolve().parent
    packaged = here / "_presets"
    if packaged.is_dir():
        return packaged
    return here.parent / "presets"


def preset_names(category: Category) -> list[str]:
    """Sorted preset names (file stems) of one category."""
    folder = presets_root() / category
    return sorted(p.stem for p in folder.glob("*.toml"))


def read_toml(path: Path) -> dict:
    """Parse a TOML file; every problem (unreadable, not UTF-8, malformed) is one SpecError line."""
    from modelplan.inputs import parse_toml, read_text, source_name

    return parse_toml(read_text(path), source_name(path))


def load_preset(category: Category, name: str) -> dict:
    """The raw TOML table of a preset; unknown names list the close matches."""
    path = presets_root() / category / f"{name.lower()}.toml"
    if not _NAME.fullmatch(name) or not path.is_file():
        import difflib

        names = preset_names(category)
        close = difflib.get_close_matches(name.lower(), names, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        kind = category.rstrip("s")
        raise PresetNotFound(
            f"unknown {kind} preset '{name}'{hint}; `modelplan presets` lists them"
        )
    return read_toml(path)
