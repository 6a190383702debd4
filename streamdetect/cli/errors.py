"""How the commands fail: input errors as one line and exit code 2, bugs as one line and exit code 3."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from streamdetect.errors import StreamdetectError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_CODES = (
    "Exit codes: 0 nothing found (or nothing that fails the run); 1 findings that fail the run; "
    "2 bad input: the topology, a data file or an option (one line naming the file, the key path or row, "
    "and what is wrong); 3 internal error, a bug (STREAMDETECT_DEBUG=1 shows the traceback); 4 (findings) "
    "no finding fails the run, but a check is incomplete: the worker has not seen an input it needs."
)


def fail_cleanly(function: F) -> F:
    """Turn streamdetect's input errors into one line on stderr and exit code 2."""

    @wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except StreamdetectError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except Exception as error:  # a bug of ours: one line for the user, the traceback on demand
            if os.environ.get("STREAMDETECT_DEBUG"):
                raise
            click.echo(
                f"internal error: {type(error).__name__}: {error} "
                "(a bug in streamdetect; rerun with STREAMDETECT_DEBUG=1 for the traceback)",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]
