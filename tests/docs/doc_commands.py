#!/usr/bin/env python3
"""tests/docs/doc_commands.py -- runs every command shown in README.md and
docs/**/*.md and compares its output with the output shown.

A fenced code block is run when its first line is a `$ ` command and one
of its commands starts with `build/cli/allocsim`.  Each `$ ` line in it is a
command (a line ending in a backslash continues on the next); the lines up
to the next `$ ` line are its expected standard output.  Commands run with
the shell's word splitting (no pipes or redirections), in a scratch
directory holding a copy of data/ and the files declared below, with
`build/cli/allocsim` replaced by the binary under test.  `$ cat NAME`
shows a file the later commands use: its output is written to NAME.

HTML comments directly above a block (one per line) adjust it:
  <!-- doc-test: skip REASON -->       do not run this block
  <!-- doc-test: volatile REGEX -->     text matching REGEX (Python re) may
                                        differ, in the expected and actual
                                        output alike (timings, addresses)
  <!-- doc-test: stderr -->             expect stdout and stderr, merged
  <!-- doc-test: exit N -->             expect exit status N (default 0)
  <!-- doc-test: file NAME -->          not a command block: write the
                                        block's text to NAME in the scratch
                                        directory for later blocks of the
                                        same Markdown file

Usage: doc_commands.py ALLOCSIM [--root DIR] [--update] [FILE.md ...]
Exit 1 with a diff per differing command, naming FILE:LINE.  --update
writes the output of now into the Markdown instead (review the diff).
"""
import argparse
import difflib
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

PROMPT = "$ "
SHOWN_BINARY = "build/cli/allocsim"
DIRECTIVE = re.compile(r"^<!-- doc-test: (skip|volatile|stderr|exit|file)"
                       r"(?: (.*?))? -->$")


def code_blocks(path):
    """[(first line number, directives, lines)] of the fenced blocks."""
    with open(path) as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        directives, k = [], i - 1
        while k >= 0 and DIRECTIVE.match(lines[k]):
            m = DIRECTIVE.match(lines[k])
            directives.insert(0, (m.group(1), m.group(2) or ""))
            k -= 1
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if j == len(lines):
            sys.exit("%s:%d: code block not closed" % (path, i + 1))
        out.append((i + 2, directives, lines[i + 1:j]))
        i = j + 1
    return out


def commands(first, lines):
    """[(line number, command, expected lines)] of a command block."""
    out, i = [], 0
    while i < len(lines):
        if not lines[i].startswith(PROMPT):
            i += 1
            continue
        n, cmd = first + i, lines[i][len(PROMPT):]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith(PROMPT):
            expected.append(lines[i])
            i += 1
        while expected and not expected[-1].strip():
            expected.pop()
        out.append((n, cmd, expected))
    return out


def mask(lines, volatile):
    out = []
    for line in lines:
        for rx in volatile:
            line = re.sub(rx, "<volatile>", line)
        out.append(line.rstrip())
    return out


def check_file(path, root, binary, scratch, update=False):
    """Runs path's command blocks; returns the number of failures.  With
    update, rewrites the shown output of each differing command."""
    rel = os.path.relpath(path, root)
    failures = 0
    edits = []  # (line number of the command, old expected, new output)
    for first, directives, lines in code_blocks(path):
        kinds = [d for d, _ in directives]
        if "file" in kinds:
            name = dict(directives)["file"]
            with open(os.path.join(scratch, name), "w") as f:
                f.write("\n".join(lines) + "\n")
            continue
        if not lines or not lines[0].startswith(PROMPT) or not any(
                cmd.startswith(SHOWN_BINARY)
                for _, cmd, _ in commands(first, lines)):
            continue
        if "skip" in kinds:
            print("%s:%d: skipped (%s)" % (rel, first, dict(directives)["skip"]))
            continue
        volatile = [v for d, v in directives if d == "volatile"]
        want_exit = int(dict(directives).get("exit", "0"))
        merge = "stderr" in kinds
        for n, cmd, expected in commands(first, lines):
            argv = shlex.split(cmd)
            if len(argv) == 2 and argv[0] == "cat":
                with open(os.path.join(scratch, argv[1]), "w") as f:
                    f.write("\n".join(expected) + "\n")
                print("%s:%d: file  %s" % (rel, n, argv[1]))
                continue
            if argv[0] == SHOWN_BINARY:
                argv[0] = binary
            r = subprocess.run(argv, cwd=scratch, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT if merge
                               else subprocess.PIPE, text=True)
            got = r.stdout.rstrip("\n").split("\n") if r.stdout else []
            want, have = mask(expected, volatile), mask(got, volatile)
            ok = want == have and r.returncode == want_exit
            print("%s:%d: %s  %s" % (rel, n, "ok  " if ok else "FAIL", cmd))
            if ok:
                continue
            failures += 1
            if update and want != have:
                edits.append((n, len(expected), got))
            if r.returncode != want_exit:
                print("  exit status %d, expected %d" % (r.returncode,
                                                         want_exit))
                if not merge and r.stderr:
                    print("  stderr: " + r.stderr.strip())
            sys.stdout.writelines("  " + l for l in difflib.unified_diff(
                [x + "\n" for x in want], [x + "\n" for x in have],
                "%s:%d (shown)" % (rel, n), "(output now)"))
    if edits:
        with open(path) as f:
            text = f.read().split("\n")
        for n, old, new in reversed(edits):
            # the command starts at line n (1-based); its output follows
            # any continuation lines
            k = n
            while text[k - 1].endswith("\\"):
                k += 1
            text[k:k + old] = new
        with open(path, "w") as f:
            f.write("\n".join(text))
        print("%s: updated %d command(s)" % (rel, len(edits)))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("allocsim")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    a = ap.parse_intermixed_args()
    root = os.path.abspath(a.root)
    binary = os.path.abspath(a.allocsim)
    files = [os.path.abspath(f) for f in a.files] or (
        [os.path.join(root, "README.md")] +
        sorted(glob.glob(os.path.join(root, "docs", "*.md")) +
               glob.glob(os.path.join(root, "docs", "*", "*.md"))))
    failures = 0
    for path in files:
        with tempfile.TemporaryDirectory(prefix="allocsim-doc.") as scratch:
            # Tests running beside this one read data/reference.db, a WAL
            # store: its -wal and -shm files come and go with their
            # connections, and one gone between listing and copying failed
            # the copy (ctest -j2, 2026-12-03).
            shutil.copytree(os.path.join(root, "data"),
                            os.path.join(scratch, "data"),
                            ignore=shutil.ignore_patterns("*-wal", "*-shm",
                                                          "*-journal"))
            failures += check_file(path, root, binary, scratch, a.update)
    if failures:
        print("doc_commands.py: %d command(s) differ from the output shown"
              % failures, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
