from pathlib import Path

from protos.generate import PROTOS_DIR, generate, generated_names


def test_committed_modules_match_a_fresh_generation(tmp_path: Path):
    generate(tmp_path)
    stale = [
        name
        for name in generated_names()
        if (tmp_path / "protos" / name).read_bytes() != (PROTOS_DIR / name).read_bytes()
    ]
    assert not stale, f"run `make protos`: {stale} differ from the .proto files"
