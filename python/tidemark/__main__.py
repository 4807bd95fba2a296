"""`python -m tidemark record train.py [ARGS...]` is `tidemark record -- python train.py
[ARGS...]` (this interpreter); any other arguments go to the `tidemark` command as they are."""
import os
import sys

from . import TidemarkError, executable


def main(argv, script_form=True):
    if script_form and len(argv) >= 2 and argv[0] == "record":
        # record's own options first, then the script and its arguments.
        options, rest = [], list(argv[1:])
        while rest and rest[0].startswith("-") and rest[0] != "--":
            options.append(rest.pop(0))
            if options[-1] in ("-o", "--output", "--stacks", "--max-entries", "--python-stacks", "--step-on",
                               "--step-range") and rest:
                options.append(rest.pop(0))
        if rest and rest[0] == "--":
            rest.pop(0)
        if not rest:
            print("usage: python -m tidemark record [OPTIONS] SCRIPT.py [ARGS...]", file=sys.stderr)
            return 2
        argv = ["record", *options, "--", sys.executable, *rest]
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
