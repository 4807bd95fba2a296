"""`python -m tidemark record train.py [ARGS...]` is `tidemark record -- python train.py
[ARGS...]` (this interpreter), and `python -m tidemark estimate train.py [ARGS...]` is `tidemark
estimate -- python train.py [ARGS...]`; any other arguments go to the `tidemark` command as they
are."""
import os
import sys

from . import TidemarkError, executable


# The commands that run this interpreter on a script, with their options that take a value.
SCRIPT_COMMANDS = {
    "record": ("-o", "--output", "--stacks", "--max-entries", "--python-stacks", "--step-on",
               "--step-range"),
    "estimate": ("-o", "--output", "--gpu", "--device-memory", "--alloc-conf", "--sweep"),
}


def main(argv, script_form=True):
    if script_form and len(argv) >= 2 and argv[0] in SCRIPT_COMMANDS:
        # The command's own options first, then the script and its arguments.
        options, rest = [], list(argv[1:])
        while rest and rest[0].startswith("-") and rest[0] != "--":
            options.append(rest.pop(0))
            if options[-1] in SCRIPT_COMMANDS[argv[0]] and rest:
                options.append(rest.pop(0))
        if rest and rest[0] == "--":
            rest.pop(0)
        if not rest:
            print(f"usage: python -m tidemark {argv[0]} [OPTIONS] SCRIPT.py [ARGS...]", file=sys.stderr)
            return 2
        argv = [argv[0], *options, "--", sys.executable, *rest]
    try:
        exe = executable()
    except TidemarkError as e:
        print(f"tidemark: {e}", file=sys.stderr)
        return 2
    os.execv(exe, [exe, *argv])


def entry():
    """The `tidemark` console script a wheel installs: the package's own command, its arguments
    as they are (`tidemark record -- python train.py`)."""
    sys.exit(main(sys.argv[1:], script_form=False))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
