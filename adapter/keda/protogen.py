"""Regenerate the Python modules of `externalscaler.proto`: `python -m adapter.keda.protogen`.

The generated `externalscaler_pb2.py`, `externalscaler_pb2.pyi` and `externalscaler_pb2_grpc.py` are
checked in, so the adapter needs only the `grpcio` and `protobuf` runtimes; `grpcio-tools` (which
bundles `protoc`) is a development dependency, imported here only. The proto is compiled with the
directory above the `adapter` package as its root, so the generated gRPC module imports the message
module by its full package path (protoc's plugin writes absolute imports).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

#: the directory holding the top-level `adapter` package
ROOT: Final = Path(__file__).resolve().parents[2]
PROTO: Final = Path(__file__).resolve().with_name("externalscaler.proto")
#: the generated files, relative to the root
OUTPUTS: Final = tuple(
    PROTO.with_name(PROTO.stem + suffix).relative_to(ROOT)
    for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
)


def generate(out: Path = ROOT) -> list[Path]:
    """Compile the proto into `out` (the package tree is mirrored there); return the files written."""
    from grpc_tools import protoc  # development dependency: only regeneration needs it

    out.mkdir(parents=True, exist_ok=True)
    relative = PROTO.relative_to(ROOT)
    (out / relative.parent).mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"--proto_path={ROOT}",
            f"--proto_path={include}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            str(relative),
        ]
    )
    if status != 0:
        raise RuntimeError(f"protoc failed with status {status} compiling {relative}")
    return [out / path for path in OUTPUTS]


def main(argv: list[str] | None = None) -> int:
    """Regenerate in place (or into `--out`)."""
    parser = argparse.ArgumentParser(prog="python -m adapter.keda.protogen", description=__doc__)
    parser.add_argument(
        "--out", type=Path, default=ROOT, help="root to write into (default: the source tree)"
    )
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
