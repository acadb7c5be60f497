"""Pages generated from the code itself at build time: the command-line reference (from the
click commands), the list of formats and the API reference's list of openers (from the format
registry)."""

from __future__ import annotations

from pathlib import Path

import click


def _help(command: click.Command, name: str, parent: click.Context | None = None) -> str:
    with click.Context(command, info_name=name, parent=parent) as ctx:
        return ctx.get_help()


def _commands(group: click.Group, parent: click.Context, path: str, level: str) -> list[str]:
    """The help of every command of `group`, and of the commands of its groups one level
    deeper (``ltdask run sum``)."""
    lines = []
    for name in group.list_commands(parent):
        command = group.get_command(parent, name)
        if command is None:
            continue
        lines += [
            f"{level} `{path} {name}`",
            "",
            "```text",
            _help(command, name, parent),
            "```",
            "",
        ]
        if isinstance(command, click.Group):
            with click.Context(command, info_name=name, parent=parent) as ctx:
                lines += _commands(command, ctx, f"{path} {name}", level + "#")
    return lines


def cli_reference() -> str:
    from ltdask.cli import main

    lines = [
        "# Command-line reference",
        "",
        "Generated from the `ltdask` command itself (`ltdask --help`, `ltdask COMMAND --help`).",
        "",
        "```text",
        _help(main, "ltdask"),
        "```",
        "",
    ]
    with click.Context(main, info_name="ltdask") as parent:
        lines += _commands(main, parent, "ltdask", "##")
    return "\n".join(lines)


def _opener_path(record) -> str:
    opener = record.opener
    if isinstance(opener, str):
        return opener.replace(":", ".")
    return f"{opener.__module__}.{opener.__qualname__}"


def format_pages() -> dict[str, str]:
    """One page per format of the registry (built-in and plug-ins installed here), and the
    table of them all."""
    from ltdask.io import registry

    pages = {}
    rows = ["| Format | Recognised by | Opener |", "| --- | --- | --- |"]
    for record in registry.formats():
        how = ", ".join(f"`{s}`" for s in record.suffixes) or "—"
        if record.magic:
            how += "; magic bytes " + ", ".join(f"`{m!r}`" for m in record.magic)
        if record.content is not None:
            how += "; its content, before the suffix"
        if record.directory:
            how += " (a directory)"
        keywords = record.keyword_names()
        lines = [
            f"# {record.name}",
            "",
            record.description[:1].upper() + record.description[1:] + ".",
            "",
            f"* `ltdask.open(path, format={record.name!r}, ...)`, "
            f"`Context.load({record.name!r}, ...)`"
            + "".join(f", `Context.load({a!r}, ...)`" for a in record.aliases),
            f"* recognised by: {how}",
            "* keywords: "
            + (", ".join(f"`{k}`" for k in keywords) if keywords else "any the opener takes"),
        ]
        if record.required:
            lines.append(
                "* needs "
                + ", ".join(f"`{k}=`" for k in record.required)
                + " (the files have no header that says them)"
            )
        lines += ["", "```{eval-rst}", f".. autofunction:: {_opener_path(record)}", "```", ""]
        pages[f"formats/{record.name}.md"] = "\n".join(lines)
        link = f"{{doc}}`{record.name} </_generated/formats/{record.name}>`"
        rows.append(f"| {link} | {how} | `{_opener_path(record)}` |")
    pages["formats-table.md"] = "\n".join(rows) + "\n"
    return pages


def api_openers() -> dict[str, str]:
    """The API reference's list of the built-in formats' openers (the registry's list, which
    ``ltdask`` exports), for ``api.rst`` to include, and their stub pages: autosummary
    writes stubs only for the names it finds in source files, not in included ones."""
    from ltdask.io.formats import _openers

    names = "".join(f"   {name}\n" for name in _openers.__all__)
    pages = {"api-openers.rst.inc": f".. autosummary::\n   :toctree: api/generated\n\n{names}"}
    for name in _openers.__all__:
        title = f"ltdask.{name}".replace("_", "\\_")
        pages[f"../api/generated/ltdask.{name}.rst"] = (
            f"{title}\n{'=' * len(title)}\n\n.. currentmodule:: ltdask\n\n"
            f".. autofunction:: {name}\n"
        )
    return pages


def write_generated(folder: Path) -> None:
    """Write the generated pages into `folder` (only when their text changed, so that
    Sphinx's incremental builds stay incremental)."""
    (folder / "formats").mkdir(parents=True, exist_ok=True)
    (folder.parent / "api" / "generated").mkdir(parents=True, exist_ok=True)
    pages = {"cli.md": cli_reference(), **api_openers(), **format_pages()}
    for name, text in pages.items():
        path = folder / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
