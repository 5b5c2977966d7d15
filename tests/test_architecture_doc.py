"""docs/architecture.md names modules: each one it names exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "toolkeeper"


def test_every_module_the_architecture_page_names_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"[\w/]*\w\.py\b", text)) | set(re.findall(r"\b(\w+)/(?=[\s`])", text))
    assert len(named) > 20
    missing = [
        name
        for name in sorted(named)
        if not any(place.exists() for place in (SOURCE / name, ROOT / name, ROOT / "src" / name))
        and not any(SOURCE.rglob(Path(name).name))
    ]
    assert missing == []
