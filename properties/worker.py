"""The worker process of ``properties.isolation``: ``python -m properties.worker``, spoken to over its stdin and
stdout (length-prefixed pickles); the kernel's own output goes to the worker's stderr.

It reads one set-up message (spec, op, device, guard, the harness's sys.path), under ``TRITON_INTERPRET=1`` patches
the interpreter's fp32 -> bf16 / e4m3 casts (``properties.interpreter_casts``), loads the kernel, answers with the
kernel's declared convention, any signature problem and whether the casts are patched, then answers calls (each
reply counting the casts the patch rounded) until its input ends.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def _probe_cuda() -> bool:
    """Does the CUDA context still work after an error?"""
    import torch

    try:
        torch.cuda.synchronize()
        return bool(torch.ones(1, device="cuda").add(1).sum().item() == 2)
    except Exception:
        return False


def serve(fn: Any, op: str, device: str, guard: bool, read: int, write: Any) -> None:
    import torch

    from properties.contract import operation
    from properties.guards import guarded_call
    from properties.interpreter_casts import ROUNDED
    from properties.isolation import describe_error, pack, receive, send, unpack

    in_place = operation(op).params.in_place
    positional = operation(op).params.positional
    target = torch.device(device)
    while True:
        message = receive(read)
        if message is None:
            return
        args, kwargs = unpack(message["args"]), unpack(message["kwargs"])
        reply: dict[str, Any] = {}
        fatal = False
        rounded = ROUNDED[0]
        try:
            result = guarded_call(fn, op, args, kwargs, target, guard=guard)
            reply["result"] = pack(result)
        except BaseException as err:  # every exception is the kernel's failure, shipped with its type
            if isinstance(err, KeyboardInterrupt):
                raise
            reply["error"] = describe_error(err)
            fatal = target.type == "cuda" and not _probe_cuda()
        reply["fatal"] = fatal
        reply["rounded_casts"] = ROUNDED[0] - rounded
        reply["in_place"] = {
            **{i: pack(a) for i, a in enumerate(args) if i < len(positional) and positional[i] in in_place},
            **{k: pack(v) for k, v in kwargs.items() if k in in_place},
        }
        send(write, reply)
        if fatal:
            return


def _die_with_parent() -> None:
    """On Linux, have the kernel send SIGKILL to this worker when the harness that started it dies, even while the
    worker is stuck in a hanging kernel and never reads its (closed) input."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the harness died before the request took effect
        os._exit(1)


def main() -> None:
    _die_with_parent()
    # the protocol keeps the original stdin and stdout; the kernel's prints go to stderr, its reads see no input
    read = os.dup(0)
    write = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    from properties.isolation import receive, send

    setup = receive(read)
    if setup is None:
        return
    sys.path[:0] = [p for p in setup["sys_path"] if p not in sys.path]
    from properties.interpreter_casts import install
    from properties.registry import LoadError, load_callable, signature_problem

    patched = os.environ.get("TRITON_INTERPRET") == "1" and install()

    try:
        fn = load_callable(setup["spec"])
    except LoadError as err:
        send(write, {"error": str(err)})
        return
    send(
        write,
        {
            "convention": getattr(fn, "csa_convention", None),
            "signature_problem": signature_problem(fn, setup["op"]),
            "pid": os.getpid(),
            "interpreter_casts": patched,
        },
    )
    serve(fn, setup["op"], setup["device"], setup["guard"], read, write)


if __name__ == "__main__":
    main()
