"""``python -m bench <b1|b2|b3|b4|b5|cron|all> [options]``; ``python -m bench b2 --help`` for the
options of one. ``all`` runs B1 to B5 one after the other with their default sizes; it takes
``--n --runs --out --pg-url --quiet-wait --timeout`` (passed to every benchmark) and
``--backlog --backlog-db --reload`` (passed to B4)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

COMMANDS = ("b1", "b2", "b3", "b4", "b5")
# What ``all`` passes on: to every benchmark, and to B4 only.
B4_ONLY = ("--backlog", "--backlog-db", "--reload")
ALL_OPTIONS = ("--n", "--runs", "--out", "--pg-url", "--quiet-wait", "--timeout", *B4_ONLY)


def run(command: str, argv: Sequence[str]) -> int:
    if command == "b1":
        from bench import b1_submit

        return b1_submit.main(argv)
    if command == "cron":
        from bench import cron

        return cron.main(argv)
    if command == "b4":
        from bench import backlog

        return backlog.main(argv)
    from bench import suite

    return suite.main(command, argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in (*COMMANDS, "cron", "all"):
        print(__doc__, file=sys.stderr)
        print("B1 submit, B2 drain, B3 herd, B4 backlog, B5 peers: see bench/README.md",
              file=sys.stderr)  # fmt: skip
        return 2
    command, rest = args[0], args[1:]
    if command != "all":
        return run(command, rest)
    pairs = _shared_options(rest)
    unknown = [p.split("\0")[0] for p in pairs if p.split("\0")[0] not in ALL_OPTIONS]
    if unknown:
        print(f"all: {', '.join(unknown)} not taken; it takes {', '.join(ALL_OPTIONS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    worst = 0
    for each in COMMANDS:
        print(f"\n=== {each} ===", flush=True)
        own = [p for p in pairs if each == "b4" or p.split("\0")[0] not in B4_ONLY]
        code = run(each, _flatten(own))
        if code == 130:
            return code
        worst = max(worst, code)
    return worst


def _shared_options(rest: Sequence[str]) -> list[str]:
    """``--name value`` pairs, kept together so that one not meant for a command can be left out."""
    pairs, i = [], 0
    while i < len(rest):
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            pairs.append(f"{rest[i]}\0{rest[i + 1]}")
            i += 2
        else:
            pairs.append(rest[i])
            i += 1
    return pairs


def _flatten(pairs: Sequence[str]) -> list[str]:
    return [part for pair in pairs for part in pair.split("\0")]


if __name__ == "__main__":
    sys.exit(main())
