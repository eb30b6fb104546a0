"""Loading one module file of an engine's released wheel, unchanged, without the engine's package imports.

Verification model: the code judged is the engine's own file, as released. The wheels are downloaded with
``pip download --no-deps`` and unpacked (their ``.py`` files and their ``METADATA``, so that
``importlib.metadata.version`` answers as for an installed package) under one directory, ``.peers/src`` by
default (``CSA_PEERS_DIR``). Nothing of them is installed and no line of them is changed. Two things stand in
the way of importing a kernel module as the engine does, and each is worked around at the import system only:

1. An engine package's ``__init__.py`` imports most of the engine (a server, its configuration, ...), so
   loading ``vllm.models.deepseek_v41.common.ops.cache_utils`` through ``vllm/__init__.py`` pulls in hundreds of
   modules and packages the harness does not have. Here a package of the engine is entered without running its
   ``__init__.py`` (an empty package module whose search path is the package's folder), except the packages
   named in ``Engine.run_init``, whose ``__init__.py`` defines what the kernel modules import from them. Every
   module file that is imported is the engine's.
2. A few third-party packages (``Engine.stubbed``: zmq, regex, ...) are imported at the top level of modules
   the kernels' modules import, for code the kernels never call. Each is replaced, for as long as the engine is
   loaded, by a stub module whose every attribute is an inert class; a kernel that did call into one would fail
   on the stub's object, not compute anything. So are the engine's compiled extensions that are imported only
   to register custom operators (``Engine.extensions``; the wheel's binaries are not unpacked), and the
   engine's own modules that a kernel's module imports only for the model classes it also defines
   (``Engine.stubbed_modules``: SGLang's model configurations, linear layers, compressor and state capturer,
   which ``srt/layers/attention/dsv4/indexer.py`` imports beside its plain-torch ``topk_transform_*``).

On a CPU, Triton kernels run in the interpreter (``TRITON_INTERPRET=1``). vLLM's ``vllm.triton_utils`` turns
Triton off when no GPU driver is active unless ``CUDA_VISIBLE_DEVICES`` is set and empty (its rule for a
process whose devices come later); on a CPU the loader sets it so, for the load, which a CPU machine does not
otherwise read.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import pathlib
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / ".peers" / "src"


@dataclass(frozen=True)
class Engine:
    """One engine's pinned wheel: its top-level package, version, and what its kernel modules need stubbed."""

    package: str
    version: str
    stubbed: tuple[str, ...]
    run_init: tuple[str, ...]
    extensions: tuple[str, ...] = ()
    """The engine's compiled extension modules its platform module imports for their side effects (custom
    operator registration), not unpacked from the wheel: stubbed as the packages of ``stubbed`` are."""
    stubbed_modules: tuple[str, ...] = ()
    """Modules of the engine itself (each with its submodules) stubbed as the packages of ``stubbed`` are: those a
    kernel's module imports only for its model classes (configuration, layers), which pull in what the harness does
    not have. No kernel judged calls into them; one that did would fail on the stub."""

    @property
    def wheel(self) -> str:
        """The pinned requirement ``pip download`` fetches."""
        return f"{self.package}=={self.version}"


VLLM = Engine(
    "vllm",
    "0.33.0",
    stubbed=(
        "aiohttp",
        "cbor2",
        "huggingface_hub",
        "openai",
        "openai_harmony",
        "pydantic",
        "pydantic_core",
        "regex",
        "requests",
        "safetensors",
        "transformers",
        "urllib3",
        "zmq",
    ),
    run_init=(
        "vllm.config",
        "vllm.distributed",
        "vllm.logging_utils",
        "vllm.model_executor.layers.quantization",
        "vllm.platforms",
        "vllm.plugins",
        "vllm.reasoning",
        "vllm.tokenizers",
        "vllm.triton_utils",
        "vllm.utils",
    ),
    # vllm.platforms.cuda, current_platform on a GPU, imports these; the kernels judged are Triton's
    extensions=("vllm._C_stable_libtorch", "vllm._qutlass_C"),
)
SGLANG = Engine(
    "sglang",
    "0.5.23",
    stubbed=("einops", "msgspec", "orjson", "pybase64", "pydantic_core", "requests", "starlette", "tvm_ffi", "zmq"),
    run_init=(
        "sglang.kernels.jit",
        "sglang.kernels.jit.utils",
        "sglang.kernels.ops.attention.dsv4",
        "sglang.kernels.ops.quantization",
        "sglang.kernels.jit.utils.compile",
        "sglang.srt.distributed",
        "sglang.srt.model_executor.runner_backend_utils",
        "sglang.srt.model_executor.runner_backend_utils.breakable_cuda_graph",
        "sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph",
        "sglang.srt.platforms",
        "sglang.srt.plugins",
        "sglang.srt.utils",
    ),
    # srt/layers/attention/dsv4/indexer.py imports these for its indexer classes, not for topk_transform_*
    stubbed_modules=(
        "sglang.srt.configs",
        "sglang.srt.layers.attention.dsv4.compressor",
        "sglang.srt.layers.linear",
        "sglang.srt.state_capturer",
    ),
)
ENGINES = {e.package: e for e in (VLLM, SGLANG)}


class PeerMissing(RuntimeError):
    """The unpacked wheel is not there (``make peers`` downloads and unpacks it)."""


def peers_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("CSA_PEERS_DIR", str(DEFAULT_DIR)))


def missing_reason(engine: Engine) -> str | None:
    """Why ``engine`` cannot be loaded here, or None."""
    where = peers_dir()
    if not (where / engine.package).is_dir():
        return f"{engine.package} {engine.version} is not unpacked under {where} (run `make peers` once, with network)"
    if not (where / f"{engine.package}-{engine.version}.dist-info").is_dir():
        return f"{where} holds another {engine.package} than the pinned {engine.version}"
    return None


def _stub_attribute(stub: Any, name: str) -> Any:
    """A stub's (a stubbed class's or an inert instance's) attribute ``name``: the class of that dotted name."""
    if name.startswith("__"):
        raise AttributeError(name)
    return _named(f"{(stub if isinstance(stub, type) else type(stub)).__qualname__}.{name}")


def _itself(stub: Any, other: Any) -> Any:
    """``stub | other``, ``other | stub`` and ``stub[other]``: the stub itself."""
    return stub


def _ignored(stub: Any, key: Any, value: Any) -> None:
    """``stub[key] = value``: nothing happens."""


class _Inert(type):
    """Any attribute of a stub is another such class, one per dotted name (so that two names never compare
    equal, as registries keyed by them expect); it can be subclassed, subscripted and or-ed in annotations."""

    __getattr__ = _stub_attribute
    __or__ = __ror__ = __getitem__ = _itself
    __setitem__ = _ignored


class Stubbed(metaclass=_Inert):
    """What a stub module's attributes are: a class; called on one class or function alone (as a decorator
    is) it returns that argument unchanged, otherwise an inert instance (its keyword arguments kept as
    attributes), itself such a decorator."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and (isinstance(args[0], type) or callable(args[0])):
            return args[0]
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # keyword arguments kept as attributes: a record class built on a stubbed base (``msgspec.Struct``)
        # still answers its fields
        for key, value in kwargs.items():
            object.__setattr__(self, key, value)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return Stubbed(*args, **kwargs)

    __getattr__ = _stub_attribute
    __or__ = __ror__ = __getitem__ = _itself
    __setitem__ = _ignored


_NAMED: dict[str, type] = {}


def _named(qualname: str) -> type:
    if qualname not in _NAMED:
        _NAMED[qualname] = _Inert(qualname.rpartition(".")[2], (Stubbed,), {"__qualname__": qualname})
    return _NAMED[qualname]


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _named(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, engine: Engine, src: pathlib.Path) -> None:
        self.engine, self.src = engine, src

    def find_spec(self, name: str, path: Sequence[str] | None, target: types.ModuleType | None = None) -> Any:
        top = name.partition(".")[0]
        stub = top in self.engine.stubbed or name in self.engine.extensions
        if stub or _under(name, self.engine.stubbed_modules):
            return importlib.util.spec_from_loader(name, self, is_package=True)
        if top == self.engine.package and name not in self.engine.run_init:
            folder = self.src.joinpath(*name.split("."))
            if folder.is_dir():
                spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
                spec.submodule_search_locations = [str(folder)]
                return spec
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    """``name`` is one of ``prefixes`` or a submodule of one."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


_FINDERS: dict[str, _Finder] = {}


def load(package: str, module: str) -> types.ModuleType:
    """The engine's module ``module`` (a dotted name under ``package``), imported from the unpacked wheel."""
    engine = ENGINES[package]
    reason = missing_reason(engine)
    if reason:
        raise PeerMissing(reason)
    src = peers_dir()
    if package not in _FINDERS:
        if str(src) not in sys.path:
            sys.path.insert(0, str(src))
        _FINDERS[package] = _Finder(engine, src)
        sys.meta_path.insert(0, _FINDERS[package])
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    if interpreted and package == "vllm":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        return importlib.import_module(module)
    finally:
        if interpreted and package == "vllm":
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved


def standalone(package: str, module: str, name: str) -> tuple[Any, str]:
    """For a script run alone (``results/peers/``): the engine's function ``name`` of ``module`` and the device
    it runs on, "cuda" where there is one, else "cpu" with Triton interpreted (set before the engine's kernels,
    and any of this project's, are defined)."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return getattr(load(package, module), name), device


def modules(package: str) -> Callable[[str], types.ModuleType]:
    """``load`` for one engine, each module loaded once: what an adapter module calls its engine's modules by."""
    return functools.cache(functools.partial(load, package))
