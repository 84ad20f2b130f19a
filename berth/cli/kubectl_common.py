"""What Berth's kubectl plugins share: kubectl's connection flags, one-line errors, exit codes.

``kubectl-create-reservation`` and ``kubectl-berth`` are separate console scripts that kubectl
runs for ``kubectl create reservation ...`` and ``kubectl berth ...``. Both take kubectl's
``-n/--namespace``, ``--context``, ``--kubeconfig`` and ``-v/--v`` flags (the decorators here),
and both end through :func:`run`, which turns every failure into one line on stderr:

- ``error: ...`` saying what to change, exit code 1 (``click.ClickException``, configuration
  and transport errors);
- usage errors (an unknown flag, a missing or malformed argument) exit 2 and point at
  ``--help``; a command group run without a command prints its help (exit 0);
- API errors read as kubectl's (``Error from server (NotFound): pods "x" not found``; a
  collection the server does not serve reads ``error: the server doesn't have a resource
  type "queues"``, naming Berth's CRDs when they are the missing ones);
- anything else is a bug, still one line; a traceback is printed only with ``--v`` > 0.
"""

from __future__ import annotations

import collections.abc
import sys
import traceback
import typing

import click

from berth.api import keys
from berth.kube.transport import errors as kube_errors

__all__ = [
    "F",
    "api_error_line",
    "connection_options",
    "namespace_option",
    "run",
    "verbosity",
    "verbosity_option",
]

F = typing.TypeVar("F", bound=collections.abc.Callable[..., typing.Any])


def namespace_option(fn: F) -> F:
    """``-n/--namespace NS`` (default: the kubeconfig context's namespace)."""
    return click.option(
        "-n", "--namespace", metavar="NS", help="Namespace (default: the context's)."
    )(fn)


def connection_options(fn: F) -> F:
    """``--context`` and ``--kubeconfig``, as kubectl reads them."""
    fn = click.option("--kubeconfig", metavar="PATH", help="Path to the kubeconfig file to use.")(
        fn
    )
    return click.option("--context", metavar="NAME", help="The kubeconfig context to use.")(fn)


def verbosity_option(fn: F) -> F:
    """``-v/--v LEVEL``: read by :func:`run` before parsing, so parse errors honour it too."""
    return click.option(
        "-v",
        "--v",
        "verbosity",
        type=int,
        default=0,
        metavar="LEVEL",
        help="Debug output: a traceback with every error when above 0.",
    )(fn)


def verbosity(argv: collections.abc.Sequence[str]) -> int:
    """The ``--v``/``-v`` level, read leniently before click parses (0 when absent or bad)."""
    for index, arg in enumerate(argv):
        value: str | None = None
        for prefix in ("--v=", "-v="):
            if arg.startswith(prefix):
                value = arg[len(prefix) :]
        if arg in ("--v", "-v") and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith("-v") and arg[2:].isdigit():
            value = arg[2:]
        if value is not None and value.isdigit():
            return int(value)
    return 0


def _missing_collection(exc: kube_errors.APIError) -> tuple[str, bool] | None:
    """``(plural, is Berth's)`` of the collection a details-less 404 was about, read from the
    request line :mod:`berth.kube` errors start with (``GET /apis/g/v/namespaces/ns/queues``)."""
    head = str(exc).split(": ", 1)[0]
    _, _, path = head.partition(" ")
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        rest = parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        rest = parts[3:]
    else:
        return None
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    return (rest[0], parts[0] == "apis" and parts[1] == keys.GROUP) if rest else None


def api_error_line(exc: kube_errors.APIError) -> str:
    """kubectl's line for an API error: ``Error from server (Reason): message``."""
    if isinstance(exc, kube_errors.NotFound) and not exc.body.get("details"):
        # A 404 naming no object: the collection itself is unknown (for Berth's: no CRDs).
        missing = _missing_collection(exc)
        if missing is not None:
            plural, berths = missing
            line = f'error: the server doesn\'t have a resource type "{plural}"'
            if berths:
                line += ": install Berth's CRDs (the Helm chart, or kubectl apply -f crds/)"
            return line
    message = exc.body.get("message")
    if not isinstance(message, str) or not message:
        message = str(exc)
    return f"Error from server ({exc.reason or exc.status}): {message}"


def run(
    command: click.Command, *, prog: str, argv: collections.abc.Sequence[str] | None = None
) -> typing.NoReturn:
    """Run ``command`` as the console script ``prog``: every failure becomes one line on
    stderr and an exit code (see the module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    code, line = 0, ""
    failure: BaseException | None = None
    try:
        result = command.main(args=args, prog_name=prog, standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except click.exceptions.NoArgsIsHelpError as exc:
        # A command group run without a command: its help is the answer, not an error.
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
    except click.UsageError as exc:
        failure, code = exc, 2
        where = exc.ctx.command_path if exc.ctx is not None else prog
        line = f"error: {exc.format_message().rstrip('.')} (see '{where} --help')"
    except click.ClickException as exc:
        failure, code, line = exc, 1, f"error: {exc.format_message()}"
    except kube_errors.APIError as exc:
        failure, code, line = exc, 1, api_error_line(exc)
    except kube_errors.KubeError as exc:
        failure, code, line = exc, 1, f"error: {exc}"
    except (click.Abort, KeyboardInterrupt) as exc:
        failure, code, line = exc, 130, "error: interrupted"
    except Exception as exc:  # a bug: say so in one line, the traceback is one --v away
        failure, code = exc, 1
        line = f"error: unexpected {type(exc).__name__}: {exc} (rerun with --v=1 for details)"
    if failure is not None:
        if verbosity(args) > 0:
            traceback.print_exception(failure)
        click.echo(line, err=True)
    sys.exit(code)
