"""How the ``ltdask`` command reports what went wrong.

* A user's mistake (a bad option value, a file that is missing or does not fit, an output
  that exists, ...): one line, ``Error: ...``, naming options as they are typed
  (``--nav-shape``, not ``nav_shape``), and exit code 2. With ``ltdask --debug`` the
  traceback comes first.
* What the system refuses (permissions, a full disk: an `OSError`): one line, exit code 1.
* Anything else is a bug in ltdask: its traceback, then one line asking for a report,
  exit code 1.

A user's mistake is a `click.ClickException` (click's own usage errors, or `UserError`
raised by the commands) or an `ltdask.LtdaskError` that reaches the command.
"""

from __future__ import annotations

import re
import traceback

import click

from ltdask._version import __version__

#: library keywords and the options that set them, for messages written for the API
OPTION_OF_KEYWORD = {
    "nav_shape": "--nav-shape",
    "sig_shape": "--sig-shape",
    "sync_offset": "--sync-offset",
    "dtype": "--dtype",
    "key": "--key",
    "format": "--format",
}
_KEYWORD_VALUE = re.compile(r"\b(" + "|".join(OPTION_OF_KEYWORD) + r")=(?=\S)")
_KEYWORD_ALONE = re.compile(r"\b(" + "|".join(OPTION_OF_KEYWORD) + r")=(?=[\s,;)]|$)")


class UserError(click.ClickException):
    """A mistake in what the user asked for: one ``Error:`` line, exit code 2."""

    exit_code = 2


def cli_terms(message: str) -> str:
    """`message`, written for the Python API, in the command line's terms:
    ``nav_shape=(0, 8)`` becomes ``--nav-shape (0, 8)``, ``pass dtype=`` ``--dtype``."""
    message = _KEYWORD_ALONE.sub(lambda m: OPTION_OF_KEYWORD[m.group(1)], message)
    return _KEYWORD_VALUE.sub(lambda m: OPTION_OF_KEYWORD[m.group(1)] + " ", message)


def one_line(message: str) -> str:
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


def _traceback(e: BaseException) -> str:
    # the commands raise their errors ``from None``; the cause is what --debug is for
    e.__suppress_context__ = False
    return "".join(traceback.format_exception(e)).rstrip()


def _group_option_hint(e: click.NoSuchOption, group: click.Command) -> str:
    """For an option of the ``ltdask`` group given after the command: where it goes."""
    names = {n for p in group.params for n in getattr(p, "opts", ())}
    if e.option_name in names:
        return (
            f"; {e.option_name} is an option of ltdask itself: ltdask {e.option_name} ... COMMAND"
        )
    return ""


def report(e: BaseException, debug: bool, group: click.Command) -> click.ClickException:
    """The one-line exception that click shows for `e` (after its traceback, where that is
    wanted); ``Exit``, ``Abort`` and click's help-instead-of-an-error pass through."""
    from ltdask.exceptions import LtdaskError

    if isinstance(e, click.exceptions.NoArgsIsHelpError | click.exceptions.Exit):
        raise e
    if isinstance(e, click.Abort):
        raise e
    if isinstance(e, BrokenPipeError):
        # the reader went away (``ltdask info ... | head``): click exits quietly
        raise e
    if isinstance(e, click.ClickException | LtdaskError):
        if debug:
            click.echo(_traceback(e), err=True)
        message = e.format_message() if isinstance(e, click.ClickException) else str(e)
        if isinstance(e, LtdaskError):
            message = cli_terms(message)
        if isinstance(e, click.NoSuchOption) and (hint := _group_option_hint(e, group)):
            message = message.rstrip(".") + hint
        return UserError(one_line(message))
    if isinstance(e, OSError):
        if debug:
            click.echo(_traceback(e), err=True)
        return click.ClickException(one_line(str(e)))
    click.echo(_traceback(e), err=True)
    return click.ClickException(
        f"internal error in ltdask {__version__} ({type(e).__name__}: {one_line(str(e))}); "
        "this is a bug: please report it with the traceback above"
    )
