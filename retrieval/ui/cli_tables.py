"""How ``topicir`` declares its subcommands: a :class:`Command` (name, help, and the function that
adds its options, called only when the command runs or the whole parser is built), and what
``topicir reproduce NAME`` and ``topicir bench AREA`` have in common: each is a
:class:`TableCommand` (its options, the library function it calls, its quick settings), run by
one handler that prints the tables and writes them with ``--write PATH``."""
from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from ..core.quick import is_quick

log = logging.getLogger("topicir")

class Command(NamedTuple):
    """A subcommand: ``fill(parser)`` adds its options and sets its ``func``; ``description``
    defaults to the help as a sentence."""

    name: str
    help: str
    fill: Callable[[argparse.ArgumentParser], None]
    description: str | None = None

    def add(self, sub, full: bool = True) -> argparse.ArgumentParser:
        """The subparser of this command in ``sub``; its options only with ``full`` (the
        listing of ``topicir --help`` needs none)."""
        p = sub.add_parser(self.name, help=self.help,
                           description=self.description or self.help[0].upper() + self.help[1:] + ".")
        if full:
            self.fill(p)
        return p


# dests of the parser that are not parameters of the library function
_OWN = {"command", "func", "quiet", "write", "spec", "argv", "defaults", "area", "reproduction", "what"}


@dataclass
class TableCommand:
    """``add(parser)`` declares the options (their dests are ``call``'s keyword parameters);
    ``call(**options)`` returns the tables; ``quick``: the options under ``TOPICIR_QUICK=1``
    (a small collection, few topics and sweeps), unless given on the command line;
    ``exit_code(tables)``: the status (e.g. 1 on a regression)."""

    name: str
    help: str
    add: Callable[[argparse.ArgumentParser], None]
    call: Callable
    quick: dict = field(default_factory=dict)
    exit_code: Callable | None = None


def add_table_commands(sub, commands: list[TableCommand]) -> None:
    """One subparser per command, each with ``--write PATH``."""
    for cmd in commands:
        description = cmd.help[0].upper() + cmd.help[1:] + "."
        if cmd.quick:
            description += (" Under TOPICIR_QUICK=1: " + ", ".join(f"{k}={_show(v)}" for k, v in cmd.quick.items())
                            + " (options given on the command line win).")
        s = sub.add_parser(cmd.name, help=cmd.help, description=description)
        cmd.add(s)
        s.add_argument("--write", metavar="PATH",
                       help="also write the tables as Markdown to PATH, with a header saying how they were made")
        s.set_defaults(func=run_table_command, spec=cmd,
                       defaults={a.dest: a.default for a in s._actions if a.dest not in _OWN})


def _show(value) -> str:
    if isinstance(value, dict):
        return "small " + " and ".join(value) + " models"
    if isinstance(value, (list, tuple)):
        return " ".join(map(_show, value))
    return str(value) if value != "" else "''"


def options(args: argparse.Namespace) -> dict:
    """The library call's keyword arguments: the parsed options, with the command's quick
    settings in place of defaults under quick mode."""
    kwargs = {k: v for k, v in vars(args).items() if k not in _OWN}
    if is_quick():
        defaults = args.defaults
        for key, value in args.spec.quick.items():
            if key not in kwargs or kwargs[key] == defaults.get(key, kwargs[key]):
                kwargs[key] = value
    return kwargs


def run_table_command(args) -> int:
    from .results import print_tables, write_tables

    tables = args.spec.call(**options(args))
    print_tables(tables)
    if args.write:
        path = write_tables(args.write, tables, args.argv)
        log.info("tables written to %s", path)
    return args.spec.exit_code(tables) if args.spec.exit_code else 0
