"""Markdown tables as the benchmarks print them: a title, the exact command, the rows, notes."""

from __future__ import annotations


def table(title: str, command: str, header: list[str], rows: list[list[str]], notes: list[str] = ()) -> None:
    print(f"### {title}\n")
    print(f"Command: `{command}`\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for note in notes:
        print(f"\n{note}")
    print(flush=True)
