"""SIGTERM and SIGINT for a worker that runs in the main thread: the first asks it to stop
(in-flight handlers get the grace period), the second to stop now (`Worker.stop`)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

from ..errors import InvalidArgument

__all__ = ["install_handlers"]

SignalHandler = Callable[[int, FrameType | None], None]


def install_handlers(install: bool | None, handler: SignalHandler) -> Callable[[], None]:
    """Route SIGTERM and SIGINT to ``handler`` (``install`` None: when in the main thread,
    the only one Python delivers signals to); returns what puts the previous ones back."""
    in_main = threading.current_thread() is threading.main_thread()
    if install is None:
        install = in_main
    if not install:
        return lambda: None
    if not in_main:
        raise InvalidArgument(
            "install_signal_handlers", "signal handlers can only be set in the main thread"
        )
    previous = {
        signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGINT)
    }

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, old)

    return restore
