from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances"


@pytest.fixture(autouse=True)
def _run_from_root(monkeypatch):
    """Doctests and tests name shipped files relative to the project root."""
    monkeypatch.chdir(ROOT)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)
