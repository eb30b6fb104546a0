"""A kernel run in a supervised worker process, so that a kernel that hangs, crashes its process or poisons its CUDA
context costs one failing example, not the run.

Verification model:

1. The kernel is loaded and called only in a worker process (``python -m properties.worker``), started with the
   harness's interpreter, environment and import path (``sys.path``); the harness process never calls it. The
   worker is found by the same spec as ``csa fuzz --impl``: ``module:callable``, ``file.py:callable``, or a
   registered implementation by id (``registry:<id>``, ``mutant:<id>``).
2. A call ships its arguments to the worker as CPU tensor bytes with their dtype, shape and strides; the worker
   builds guarded copies on the kernel's device (``properties.guards``), calls the kernel, synchronizes, checks
   the guards and ships back the result and the in-place arguments, which are copied into the caller's tensors.
3. A call not answered within ``timeout`` seconds is a failure, ``KernelTimeout`` ("timed out after N s"): the
   worker's whole process group is killed.
4. A worker that dies during a call (a signal such as SIGSEGV or SIGABRT, or an exit) is a failure,
   ``KernelCrash``, naming the signal, with the last lines the worker wrote to stderr.
5. An exception the kernel raises is raised again in the harness with its type (its nearest builtin base class
   where its own class cannot be loaded there), its message, and where in the kernel it was raised. After an
   exception on a GPU the worker checks that its CUDA context still works (an illegal memory access, a
   device-side assert leave it unusable) and exits if not.
6. After 3, 4 or 5-with-exit a fresh worker is started at once, in the background, and the next call waits for
   it: no call runs in a worker that has timed out or crashed.
7. A worker never outlives the harness: it exits at the end of its input, and on Linux the kernel kills it when
   the harness dies (``PR_SET_PDEATHSIG``), even while it is stuck in a hanging kernel.
"""

from __future__ import annotations

import builtins
import os
import pathlib
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import IO, Any

DEFAULT_TIMEOUT = {"cpu": 60.0, "cuda": 30.0}
"""Seconds per call: on a CPU, Triton kernels run interpreted (a large example takes seconds); on a GPU the first
call of a new shape compiles the kernel."""
STARTUP_TIMEOUT = 300.0
"""Seconds a worker may take to start and load the kernel (importing torch, Triton and the kernel's module)."""
STDERR_LINES = 12  # lines of the worker's stderr quoted in a crash or timeout report
HARNESS_ROOT = str(pathlib.Path(__file__).resolve().parents[1])


class KernelTimeout(Exception):
    """The kernel did not return within the per-call limit; its worker was killed."""


class KernelCrash(Exception):
    """The worker running the kernel died during the call (a signal, an abort, an exit)."""


class WorkerStartError(Exception):
    """The worker could not start or load the kernel (a loading error, not a failure of the kernel)."""


@dataclass(frozen=True)
class Packed:
    """A tensor as bytes: its storage from its first element to its last, with dtype, shape and strides."""

    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    data: bytes


def pack(value: Any) -> Any:
    """``value`` with every tensor (in tuples, lists and dicts too) replaced by a ``Packed`` CPU copy."""
    import torch

    if isinstance(value, torch.Tensor):
        from properties.guards import span_elements

        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        span = span_elements(t)
        flat = t.as_strided((span,), (1,), t.storage_offset()).contiguous()
        data = flat.view(torch.uint8).numpy().tobytes() if span else b""
        return Packed(str(t.dtype).removeprefix("torch."), tuple(t.shape), tuple(t.stride()), data)
    if isinstance(value, tuple | list):
        return type(value)(pack(v) for v in value)
    if isinstance(value, dict):
        return {k: pack(v) for k, v in value.items()}
    return value


def unpack(value: Any) -> Any:
    """The inverse of ``pack``: CPU tensors with the packed dtype, shape and strides."""
    import torch

    if isinstance(value, Packed):
        dtype = getattr(torch, value.dtype)
        raw = torch.frombuffer(bytearray(value.data), dtype=torch.uint8) if value.data else torch.empty(0)
        typed = raw.view(dtype) if value.data else torch.empty(0, dtype=dtype)
        return typed.as_strided(value.shape, value.stride, 0)
    if isinstance(value, tuple | list):
        return type(value)(unpack(v) for v in value)
    if isinstance(value, dict):
        return {k: unpack(v) for k, v in value.items()}
    return value


def send(stream: IO[bytes], message: Any) -> None:
    blob = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(blob)) + blob)
    stream.flush()


def _read_exactly(fd: int, size: int, deadline: float | None) -> bytes | None:
    """``size`` bytes from ``fd``; None at end of file; TimeoutError past ``deadline``."""
    chunks, got = [], 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(size - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(fd: int, deadline: float | None = None) -> Any:
    """One message from ``fd``; None at end of file (the other side is gone)."""
    head = _read_exactly(fd, 8, deadline)
    if head is None:
        return None
    body = _read_exactly(fd, struct.unpack("<Q", head)[0], deadline)
    return None if body is None else pickle.loads(body)


def describe_error(err: BaseException) -> dict[str, Any]:
    """An exception as the worker ships it: pickled where it can be, with its type, builtin base, message and the
    place in the kernel it was raised."""
    try:
        blob: bytes | None = pickle.dumps(err)
    except Exception:
        blob = None
    base = next((c.__name__ for c in type(err).__mro__ if getattr(builtins, c.__name__, None) is c), "Exception")
    frames = traceback.extract_tb(err.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    if type(err).__module__.startswith("properties."):
        where = ""  # the harness's own finding (a guard violation), not an exception of the kernel
    return {
        "blob": blob,
        "type": type(err).__name__,
        "module": type(err).__module__,
        "base": base,
        "message": str(err),
        "where": where,
    }


def rebuild_error(info: dict[str, Any]) -> BaseException:
    """The exception ``describe_error`` shipped: the original where it unpickles here, else an exception of the
    same name deriving from its builtin base (so ``except ValueError`` still catches a kernel's ValueError)."""
    err: BaseException | None = None
    if info["blob"] is not None:
        try:
            err = pickle.loads(info["blob"])
        except Exception:
            err = None
    if not isinstance(err, BaseException):
        base = getattr(builtins, info["base"], Exception)
        if not (isinstance(base, type) and issubclass(base, Exception)):
            base = Exception
        cls = type(info["type"], (base,), {"__module__": info["module"]})
        err = cls(info["message"])
    if info["where"]:
        try:
            setattr(err, "csa_where", info["where"])  # noqa: B010  (read back with getattr by the reports)
        except AttributeError:
            pass
    return err


PLUMBING = (
    f'File "{HARNESS_ROOT}/properties/worker.py"',
    f'File "{HARNESS_ROOT}/properties/guards.py"',
    f'File "{HARNESS_ROOT}/properties/registry.py"',
    'File "<frozen ',
)


def _plumbing(line: str) -> bool:
    """A line of the worker's stderr that is about the worker, not the kernel: faulthandler's list of extension
    modules and thread id, and the frames of the worker's own call into the kernel."""
    text = line.strip()
    return text.startswith(("Extension modules:", "Current thread 0x")) or text.startswith(PLUMBING)


def _signal_name(code: int) -> str:
    try:
        name = f"{signal.Signals(-code).name} (signal {-code})"
    except ValueError:
        return f"signal {-code}"
    return f"{name}, which is often the out-of-memory killer's" if -code == signal.SIGKILL else name


class Worker:
    """One worker process: started at construction, ready once it has loaded the kernel."""

    def __init__(self, spec: str, op: str, device: str, guard: bool) -> None:
        self.stderr_path = pathlib.Path(tempfile.mkstemp(prefix="csa-worker-", suffix=".log")[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([HARNESS_ROOT, *filter(None, [env.get("PYTHONPATH")])])
        env.setdefault("PYTHONFAULTHANDLER", "1")
        with self.stderr_path.open("ab") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "properties.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                start_new_session=True,
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        path = [str(pathlib.Path(p or ".").resolve()) for p in sys.path]
        send(self.stdin, {"spec": spec, "op": op, "device": device, "guard": guard, "sys_path": path})
        self.hello: dict[str, Any] | None = None

    def ready(self, timeout: float = STARTUP_TIMEOUT) -> dict[str, Any]:
        if self.hello is None:
            try:
                hello = receive(self.stdout.fileno(), time.monotonic() + timeout)
            except TimeoutError:
                self.kill()
                raise WorkerStartError(f"--impl: the worker did not load the kernel within {timeout:.0f} s") from None
            if hello is None:
                code = self.proc.wait()
                last = self.stderr_lines()[-1:]
                self.kill()
                said = f"; its stderr ends: {last[0].strip()}" if last else ""
                raise WorkerStartError(
                    f"--impl: the worker exited ({self.exit_text(code)}) while loading the kernel{said}"
                )
            if "error" in hello:
                self.kill()
                raise WorkerStartError(hello["error"])
            self.hello = hello
        return self.hello

    def exit_text(self, code: int) -> str:
        return _signal_name(code) if code < 0 else f"exit status {code}"

    def stderr_lines(self) -> list[str]:
        """What the worker wrote to stderr, less the lines about the worker itself."""
        try:
            lines = self.stderr_path.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return [line for line in lines if line.strip() and not _plumbing(line)]

    def stderr_tail(self) -> str:
        lines = self.stderr_lines()[-STDERR_LINES:]
        return "\nlast lines of the worker's stderr:\n" + "\n".join(f"  | {line}" for line in lines) if lines else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.wait()
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.stderr_path.unlink(missing_ok=True)

    def close(self) -> None:
        """Ask the worker to exit (end of its input), then make sure it has."""
        try:
            self.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class Supervisor:
    """The kernel named by ``spec`` behind a plain callable: ``supervisor(*args, **kwargs)`` runs one call in the
    worker (verification model above). ``restarts`` counts the workers replaced after a timeout or crash."""

    def __init__(
        self, spec: str, op: str, *, device: str = "cpu", timeout: float | None = None, guard: bool = True
    ) -> None:
        self.spec, self.op, self.device, self.guard = spec, op, device, guard
        self.timeout = DEFAULT_TIMEOUT[device] if timeout is None else timeout
        self.restarts = 0
        self.calls = 0
        self.rounded_casts = 0
        """Elements the workers' patched interpreter casts rounded (``properties.interpreter_casts``)."""
        self._worker: Worker | None = Worker(spec, op, device, guard)

    def hello(self) -> dict[str, Any]:
        """What the worker reports once the kernel is loaded: ``convention`` (its ``csa_convention``) and
        ``signature_problem``. Raises ``WorkerStartError`` where it cannot load it."""
        return self._current().ready()

    def _current(self) -> Worker:
        if self._worker is None or (not self._worker.alive() and self._worker.hello is not None):
            self._worker = Worker(self.spec, self.op, self.device, self.guard)
        return self._worker

    def _replace(self, worker: Worker) -> None:
        """Kill ``worker`` and start its successor now, so it loads while the harness prepares the next call."""
        worker.kill()
        self.restarts += 1
        self._worker = Worker(self.spec, self.op, self.device, self.guard)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        worker = self._current()
        worker.ready()
        self.calls += 1
        message = {"args": pack(list(args)), "kwargs": pack(kwargs)}
        try:
            send(worker.stdin, message)
            reply = receive(worker.stdout.fileno(), time.monotonic() + self.timeout)
        except TimeoutError:
            tail = worker.stderr_tail()
            self._replace(worker)
            raise KernelTimeout(
                f"timed out after {self.timeout:g} s (the worker was killed and restarted){tail}"
            ) from None
        except (BrokenPipeError, ConnectionResetError):
            reply = None
        if reply is None:
            code = worker.proc.wait()
            tail = worker.stderr_tail()
            self._replace(worker)
            raise KernelCrash(
                f"the worker running the kernel died with {worker.exit_text(code)} during the call "
                f"(a fresh worker was started){tail}"
            )
        self.rounded_casts += int(reply.get("rounded_casts", 0))
        for key, value in reply["in_place"].items():
            target = args[key] if isinstance(key, int) else kwargs[key]
            target.copy_(unpack(value))
        if reply.get("fatal"):
            self._replace(worker)
        if "error" in reply:
            err = rebuild_error(reply["error"])
            if reply.get("fatal"):
                err.add_note("the worker's CUDA context was unusable afterwards; a fresh worker was started")
            raise err
        return unpack(reply["result"])

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
