"""Find and read the TOML presets shipped with modelplan (models, accelerators, clusters,
training engines).

In a source checkout they live in `<repo>/presets`; an installed wheel carries them as
`modelplan/_presets` (see pyproject's force-include).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from modelplan.errors import PresetNotFound, SpecError

Category = Literal["models", "accelerators", "clusters", "frameworks"]


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
    """Parse a TOML file; a syntax error becomes a one-line SpecError naming the file."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path.name}: malformed TOML: {exc}") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None


def load_preset(category: Category, name: str) -> dict:
    """The raw TOML table of a preset; unknown names list the close matches."""
    path = presets_root() / category / f"{name.lower()}.toml"
    if not path.is_file():
        import difflib

        names = preset_names(category)
        close = difflib.get_close_matches(name.lower(), names, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        kind = category.rstrip("s")
        raise PresetNotFound(
            f"unknown {kind} preset '{name}'{hint}; `modelplan presets` lists them"
        )
    return read_toml(path)
