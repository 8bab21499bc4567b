"""``python -m tirxpy <command>``: demo, layout, compile."""
from __future__ import annotations

import sys

COMMANDS = {
    "demo": ("tirxpy.demo", "run the end-to-end demo"),
    "layout": ("tirxpy.layout.cli", "inspect a layout: owners, table, plot"),
    "compile": ("tirxpy.lower.cli", "compile kernels and print their resources"),
}


def main(argv=None) -> int:
    from tirxpy.command_line import checked_argv

    argv = checked_argv(argv, "tirxpy")
    if argv is None:
        return 2
    if not argv or argv[0] in ("-h", "--help"):     # asked for: stdout, 0; no command: a usage error on stderr, 2
        out = sys.stdout if argv else sys.stderr
        print("usage: python -m tirxpy <command> [args]\n\ncommands:", file=out)
        for name, (_, text) in COMMANDS.items():
            print(f"  {name:<8} {text}", file=out)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"tirxpy: unknown command {cmd!r}; choose one of {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    import importlib

    try:
        mod = importlib.import_module(COMMANDS[cmd][0])
    except ModuleNotFoundError as e:
        if e.name == COMMANDS[cmd][0]:
            print(f"tirxpy: command {cmd!r} is not available in this build", file=sys.stderr)
        else:           # a package the command needs is not installed
            print(f"tirxpy: command {cmd!r} needs the module {e.name!r}, which is not installed "
                  f"(pip install {str(e.name).split('.')[0]})", file=sys.stderr)
        return 2
    return mod.main(rest)


if __name__ == "__main__":
    sys.exit(main())
