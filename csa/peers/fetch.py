"""``python -m csa.peers.fetch``: download the pinned engine wheels and unpack the files the adapters read.

``pip download --no-deps`` puts each wheel (``csa.peers.loader.ENGINES``) under ``.peers/wheels`` (skipped when
it is there already); its ``.py`` files, its ``METADATA`` and SGLang's JIT headers and sources (its
``sglang.kernels.jit`` package asserts that they exist) are unpacked under ``.peers/src``. Nothing is installed.

``--carry DIR`` then copies, from ``.peers/src``, the folders whose modules the adapters import (found by
importing them in a fresh interpreter), every ``.py`` file of each, with the ``METADATA`` and the JIT files:
a tree of a few megabytes for a machine without network (``scripts/gpu_check.sh peers`` uses ``.peers/carry``
where it exists).
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import zipfile

from csa.peers.loader import ENGINES, ROOT

PEERS = ROOT / ".peers"
JIT = ("sglang/kernels/jit/include/", "sglang/kernels/jit/csrc/")


def wanted(name: str) -> bool:
    return name.endswith(".py") or (".dist-info/" in name and name.endswith("METADATA")) or name.startswith(JIT)


def download(wheels: pathlib.Path) -> list[pathlib.Path]:
    wheels.mkdir(parents=True, exist_ok=True)
    found = []
    for engine in ENGINES.values():
        pattern = f"{engine.package}-{engine.version}-*.whl"
        if not list(wheels.glob(pattern)):
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), engine.wheel]
            print("$", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
        found.append(sorted(wheels.glob(pattern))[-1])
    return found


def unpack(wheels: list[pathlib.Path], src: pathlib.Path) -> None:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(src, [n for n in z.namelist() if wanted(n)])
        print(f"unpacked {wheel.name} -> {src}")


LOADED = """
import json, sys
from csa.peers import sglang_ops, vllm_ops
vllm_modules = (vllm_ops.V4_CACHE, vllm_ops.V41_CACHE, vllm_ops.CANDIDATES, vllm_ops.SPARSE_LOGITS)
vllm_modules += (vllm_ops.V4_COMPRESS, vllm_ops.V41_COMPRESS, "vllm.platforms.cuda")
for name in vllm_modules:
    vllm_ops.module(name)  # vllm.platforms.cuda: current_platform on a GPU
for name in (sglang_ops.CANDIDATES, sglang_ops.DEQUANT, sglang_ops.INDEX_CACHE, sglang_ops.INDEXER):
    try:
        sglang_ops.module(name)
    except Exception as err:
        print(f"not loadable: {name}: {err}", file=sys.stderr)
files = {m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None)}
# a package entered without its __init__.py has no file: its folder, as a file in it
for m in list(sys.modules.values()):
    path = getattr(m, "__path__", None)
    if isinstance(path, list):
        files |= {f"{p}/__init__.py" for p in path if isinstance(p, str)}
print(json.dumps(sorted(files)))
"""


def carry(src: pathlib.Path, dest: pathlib.Path) -> None:
    import json
    import os

    env = dict(os.environ, CSA_PEERS_DIR=str(src), TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True, env=env, check=True)
    files = [pathlib.Path(f) for f in json.loads(out.stdout.strip().splitlines()[-1])]
    folders = {f.parent.relative_to(src) for f in files if f.is_relative_to(src)}
    if dest.exists():
        shutil.rmtree(dest)
    count = 0
    for folder in sorted(folders):
        (dest / folder).mkdir(parents=True, exist_ok=True)
        for py in (src / folder).glob("*.py"):
            shutil.copy2(py, dest / folder / py.name)
            count += 1
    for extra in [*src.glob("*.dist-info"), *(src / j for j in JIT)]:
        shutil.copytree(extra, dest / extra.relative_to(src), dirs_exist_ok=True)
    print(f"carried {count} module files of {len(folders)} folders -> {dest}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m csa.peers.fetch", description=__doc__)
    parser.add_argument("--carry", type=pathlib.Path, help="also copy the modules the adapters import here")
    args = parser.parse_args(argv)
    src = PEERS / "src"
    unpack(download(PEERS / "wheels"), src)
    if args.carry:
        carry(src, args.carry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
