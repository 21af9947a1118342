"""What every command line does with its errors: a user's mistake is one line on stderr
and an exit status, never a traceback; a closed stdout (`| head`) ends quietly, and Ctrl-C
with one line and status 130 (128 + SIGINT, as shells report it)."""
from __future__ import annotations

import os
import sys
from typing import Callable

from specio.errors import SpecError


def run(body: Callable[[], int | None], statuses: tuple[tuple[type[Exception], int], ...] = ()) -> int:
    """Run a command's `body` and return its exit status. `statuses` maps further
    exception types (checked first, in order) to statuses; SpecError and unreadable or
    unwritable files (OSError) give 2."""
    try:
        return body() or 0
    except KeyboardInterrupt:  # Ctrl-C: the workers end quietly too (`pmapgen.all_einsums`)
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 -- re-raised below unless it is a known user error
        for kind, status in (*statuses, (SpecError, 2)):
            if isinstance(exc, kind):
                print(f"error: {exc}", file=sys.stderr)
                return status
        if isinstance(exc, OSError):
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
            return 2
        raise
