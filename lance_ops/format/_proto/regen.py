"""Regenerate the checked-in ``*_pb2.py`` modules from ``protos/*.proto``.

Run with ``make protos``. Needs grpcio-tools (a dev dependency), never at run time.
The generated modules import each other with relative imports so that they live
inside the ``lance_ops.format._proto`` package.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROTO_DIR = ROOT / "protos"
OUT_DIR = Path(__file__).resolve().parent


def generate(out_dir: Path = OUT_DIR) -> list[Path]:
    """Compile every proto in ``protos/`` into ``out_dir``; return the written files."""
    import grpc_tools  # dev-only dependency
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    protos = sorted(str(p.name) for p in PROTO_DIR.glob("*.proto"))
    args = ["protoc", f"-I{PROTO_DIR}", f"-I{well_known}", f"--python_out={out_dir}", f"--pyi_out={out_dir}", *protos]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed for {protos}")
    written = []
    for path in sorted(out_dir.glob("*_pb2.py*")):
        text = path.read_text()
        fixed = re.sub(r"^import (\w+_pb2)", r"from . import \1", text, flags=re.M)
        path.write_text(fixed)
        written.append(path)
    return written


if __name__ == "__main__":
    for p in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR):
        print(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)
