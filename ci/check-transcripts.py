#!/usr/bin/env python3
"""Hold the README's and the book's transcripts to what hilt prints today.

Every fenced `console` or `text` block of README.md and docs/**.md that
shows `$ hilt ...` followed by output is run again and compared, line for
line, so that a figure a transcript shows (cycles, bytes, offsets, counts)
is one a run still gives. Usage: ci/check-transcripts.py HILT_BINARY

- Each command runs from the repository's root. Files it writes (`-o`,
  `--write-offline`) go to a scratch folder, and later commands of the
  same block read them from there; a `> FILE` redirection drops stdout.
- A model named by its bare file name (`mlperf_tiny_...tflite`) is taken
  from the first conformance set (HILT_CONFORMANCE_DIR, else
  ../shared/conformance); a command whose files are nowhere is reported as
  skipped, and fails the check when HILT_CONFORMANCE_REQUIRED=1.
- Compared: the shown lines against stdout and stderr together, without
  hilt's firmware-build progress lines and the `reports:` and `results:`
  lines, with wall
  times and planner times masked (they are the host's, not the run's) and
  RAM and code addresses too (they move with any change to the firmware). A
  `…` line in a transcript stands for any number of lines.
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
MASKS = [
    (re.compile(r"\d+(\.\d+)? s wall"), "N s wall"),
    (re.compile(r"^(time\s+)[\d.]+ ms$"), r"\1N ms"),
    # RAM addresses move with any change to the firmware's statics.
    (re.compile(r"\b0x2[0-9a-f]{7}\b"), "0x2XXXXXXX"),
    # So do code addresses and offsets into a function (an access check's
    # `pc 0x000a4c14 in conv_i8+0x37de`).
    (re.compile(r"\bpc 0x[0-9a-f]{8} in (\S+)\+0x[0-9a-f]+"), r"pc 0xXXXXXXXX in \1+0xN"),
]
DROPPED = re.compile(r"^(hilt: build(ing|t) |reports: |results: )")
WRITES = {"-o", "--output", "--write-offline"}
FILE_ARG = re.compile(r"\.(tflite|toml|csv|npy)$")


def blocks(path):
    """(first line number, [lines]) of every console/text block."""
    out, inside, start, lines = [], False, 0, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = FENCE.match(line)
        if m and not inside and m.group(2) in ("console", "text"):
            inside, start, lines = True, number, []
        elif m and inside:
            inside = False
            out.append((start, lines))
        elif inside:
            lines.append(line)
    return out


def commands(lines):
    """(command, shown output lines) for each `$ hilt` line of a block."""
    out = []
    for line in lines:
        if line.startswith("$ "):
            out.append([line[2:], []])
        elif out:
            out[-1][1].append(line.rstrip())
    return [(c, shown) for c, shown in out if c.startswith("hilt ")]


def normal(line):
    line = line.rstrip()
    for pattern, replacement in MASKS:
        line = pattern.sub(replacement, line)
    return line


def matches(shown, actual):
    """Whether `actual` is `shown`, a `…` line standing for any run."""
    if not shown:
        return True
    if shown[0].strip() == "…":
        return any(matches(shown[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and shown[0] == actual[0] and matches(shown[1:], actual[1:])


def first_set():
    dirs = os.environ.get("HILT_CONFORMANCE_DIR", str(REPO.parent / "shared/conformance"))
    return Path(dirs.split(":")[0])


def arguments(tokens, scratch, written):
    """The command's arguments with files placed (None when one is
    nowhere), and whether its stdout is shown."""
    args = []
    for k, token in enumerate(tokens):
        if token == ">":
            return args, False
        if k > 0 and tokens[k - 1] in WRITES:
            written.add(token)
            token = str(scratch / token)
        elif FILE_ARG.search(token) and not (REPO / token).exists():
            if token in written:
                token = str(scratch / token)
            elif (first_set() / "models" / token).exists():
                token = str(first_set() / "models" / token)
            else:
                return None, True
        args.append(token)
    return args, True


def check_block(hilt, where, lines):
    failures, skipped, ran = [], [], 0
    with tempfile.TemporaryDirectory() as scratch:
        scratch, written = Path(scratch), set()
        for command, shown in commands(lines):
            tokens = shlex.split(command, comments=True)[1:]
            args, keep_stdout = arguments(tokens, scratch, written)
            if args is None:
                skipped.append(f"{where}: {command} (a file it names is not here)")
                continue
            result = subprocess.run(
                [hilt, *args], cwd=REPO, capture_output=True, text=True, timeout=900
            )
            ran += 1
            text = (result.stdout if keep_stdout else "") + result.stderr
            actual = [
                normal(line.replace(f"{scratch}/", ""))
                for line in text.splitlines()
                if not DROPPED.match(line)
            ]
            expected = [normal(line) for line in shown if not DROPPED.match(line)]
            while actual and not actual[-1]:
                actual.pop()
            while expected and not expected[-1]:
                expected.pop()
            if result.returncode not in (0, 1):
                failures.append(f"{where}: `{command}` exited {result.returncode}:\n{text}")
            elif not matches(expected, actual):
                failures.append(
                    f"{where}: `{command}` prints something else now.\n"
                    + "--- shown\n" + "\n".join(expected)
                    + "\n--- printed\n" + "\n".join(actual)
                )
    return ran, failures, skipped


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    hilt = sys.argv[1]
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    ran, failures, skipped = 0, [], []
    for page in pages:
        for start, lines in blocks(page):
            where = f"{page.relative_to(REPO)}:{start}"
            r, f, s = check_block(hilt, where, lines)
            ran, failures, skipped = ran + r, failures + f, skipped + s
    for s in skipped:
        print(f"check-transcripts: skipped {s}")
    for f in failures:
        print(f"check-transcripts: {f}\n")
    print(f"check-transcripts: {ran} transcripts run, {len(failures)} differ, {len(skipped)} skipped")
    required = os.environ.get("HILT_CONFORMANCE_REQUIRED") == "1"
    sys.exit(1 if failures or (skipped and required) else 0)


if __name__ == "__main__":
    main()
