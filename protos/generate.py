"""Regenerate the committed gRPC/protobuf modules from the .proto files.

``make protos`` runs this module; ``tests/unit/test_protos_in_sync.py`` calls
``generate(tmp)`` and compares the result with the committed files, so a
.proto edit without regeneration fails the tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTOS_DIR = Path(__file__).resolve().parent
PROTO_FILES = ("common.proto", "metastore.proto", "bookie.proto", "broker.proto")


def generated_names() -> list[str]:
    names = []
    for proto in PROTO_FILES:
        stem = proto.removesuffix(".proto")
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi"]
        if stem != "common":
            names.append(f"{stem}_pb2_grpc.py")
    return names


def generate(out_root: Path) -> None:
    """Write the generated modules under ``out_root/protos/``."""
    from grpc_tools import protoc  # dev dependency; imported only when generating

    (out_root / "protos").mkdir(parents=True, exist_ok=True)
    include = str(Path(protoc.__file__).parent / "_proto")
    for proto in PROTO_FILES:
        args = [
            "grpc_tools.protoc",
            f"-I{PROTOS_DIR.parent}",
            f"-I{include}",
            f"--python_out={out_root}",
            f"--pyi_out={out_root}",
        ]
        if proto != "common.proto":
            args.append(f"--grpc_python_out={out_root}")
        args.append(str(PROTOS_DIR / proto))
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {proto}")


def main() -> int:
    generate(PROTOS_DIR.parent)
    print("regenerated: " + ", ".join(generated_names()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
