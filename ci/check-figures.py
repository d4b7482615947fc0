#!/usr/bin/env python3
"""Holds the book's bench-target table to a run: every row of the table in
docs/performance.md ("On Cortex-M") must match, model and board alike, the
row `hilt bench-target --format markdown` printed in this run
(ci/run-tests.sh writes build/reports/bench-target.md):

- hilt's instructions per inference and its arena bytes exactly (QEMU's
  -icount makes them the same on every machine);
- the firmware's flash bytes within 1 % (they move with any change of code
  or panic message, which is not a figure the book claims to the byte);
- TFLM's columns exactly (the external figures, from the conformance set);
- the second table, hilt's estimated cycles on the MLPerf Tiny
  reference part beside the published records, cell for cell;
- the third, the flash of a firmware with only the model's kernels:
  the operators exactly, the model bytes exactly, every other byte
  figure within 1 % of that firmware's flash;
- and the fourth, that firmware built for speed and for size: the
  instructions, the ratio and the estimated cycles exactly, the flash
  within 1 %; and, whatever the book says, the run's size builds within
  the flash the book promises (FLASH_TARGETS: hello_world within 64 KiB,
  KWS within 160 KiB, on the AN386).

Usage: ci/check-figures.py RUN.md [BOOK.md]. Exit 1 naming each row that
differs, or a row of the book the run does not have."""

import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent

# The flash a size build of the model's kernels must fit on the board: the
# book promises these (the targets of issue 23), so a run over them fails
# even when the book's own figure was updated to match.
FLASH_TARGETS = {
    ("tflm_hello_world_int8", "qemu-mps2-an386"): 64 * 1024,
    ("mlperf_tiny_kws_dscnn_int8", "qemu-mps2-an386"): 160 * 1024,
}


def rows(text: str, header: str = "| model | board |", key: str = "board") -> dict:
    """(model, KEY) -> {column: cell} of the first table whose header starts
    with HEADER."""
    lines = [l.strip() for l in text.splitlines()]
    out = {}
    for i, line in enumerate(lines):
        if not (line.startswith(header) and i + 1 < len(lines)):
            continue
        names = [c.strip() for c in line.strip("|").split("|")]
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            cells = [c.strip() for c in row.strip("|").split("|")]
            record = dict(zip(names, cells))
            out[(record["model"], record[key])] = record
        break
    return out


def number(cell: str) -> int:
    return int(cell.split("/")[0].strip().replace(",", ""))


def column(record: dict, prefix: str) -> str:
    for name, cell in record.items():
        if name.startswith(prefix):
            return cell
    raise KeyError(prefix)


def pairs(run_path, book_path, header: str, key: str, label: str, faults: list) -> list:
    """(where, book row, run row) for every row of the book's table under
    HEADER; a missing table or a row the run lacks is a fault."""
    run = rows(run_path.read_text(), header, key)
    book = rows(book_path.read_text(), header, key)
    if not book:
        faults.append(f"{book_path.name}: no table {header} ...")
    out = []
    for (model, other), want in book.items():
        where = f"{book_path.name}: {model}, " + label.format(other)
        got = run.get((model, other))
        if got is None:
            faults.append(f"{where}: not in this run's table ({run_path})")
        else:
            out.append((where, want, got))
    return out


def main() -> int:
    run_path = pathlib.Path(sys.argv[1])
    book_path = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else REPO / "docs/performance.md"
    run, book = rows(run_path.read_text()), rows(book_path.read_text())
    if not book:
        print(f"{book_path}: no bench-target table found", file=sys.stderr)
        return 1
    faults = []
    for key, want in book.items():
        got = run.get(key)
        where = f"{book_path.name}: {key[0]} on {key[1]}"
        if got is None:
            faults.append(f"{where}: not in this run's table ({run_path})")
            continue
        for prefix in ["hilt instructions", "arena hilt", "TFLM reference", "TFLM + CMSIS-NN"]:
            a, b = column(want, prefix), column(got, prefix)
            if a.split("/")[0].strip() != b.split("/")[0].strip():
                faults.append(f"{where}: {prefix}: the book says {a}, this run {b}")
        a, b = number(column(want, "flash")), number(column(got, "flash"))
        if abs(a - b) > a / 100:
            faults.append(f"{where}: flash: the book says {a:,}, this run {b:,} (more than 1 % apart)")
    # The estimates on the MLPerf Tiny reference part beside its records:
    # every figure exactly (the estimate is the plugin's, deterministic).
    book_part = pairs(run_path, book_path, "| model | timing profile |", "timing profile", "with the {} profile", faults)
    for where, want, got in book_part:
        for name, cell in want.items():
            if got.get(name) != cell:
                faults.append(f"{where}: {name}: the book says {cell}, this run {got.get(name)}")
    # The flash of the model's-kernels firmware, by part.
    book_flash = pairs(run_path, book_path, "| model | board | flash, every kernel |", "board", "flash on {}", faults)
    for where, want, got in book_flash:
        total = number(want["flash, the model's kernels"])
        for name, cell in want.items():
            if name in ("model", "board"):
                continue
            exact = name in ("operators", "model bytes")
            a, b = number(cell), number(got.get(name, "-1"))
            if (a != b) if exact else abs(a - b) > total / 100:
                faults.append(f"{where}: {name}: the book says {cell}, this run {got.get(name)}")
    # The model's-kernels firmware built for speed and for size.
    book_size = pairs(run_path, book_path, "| model | board | flash, for speed |", "board", "size on {}", faults)
    for where, want, got in book_size:
        for name, cell in want.items():
            if name in ("model", "board"):
                continue
            if name.startswith("flash"):
                a, b = number(cell), number(got.get(name, "-1"))
                bad = abs(a - b) > a / 100
            else:
                bad = got.get(name) != cell
            if bad:
                faults.append(f"{where}: {name}: the book says {cell}, this run {got.get(name)}")
    run_size = rows(run_path.read_text(), "| model | board | flash, for speed |")
    for (model, board), limit in FLASH_TARGETS.items():
        got = run_size.get((model, board))
        if got is None:
            faults.append(f"{run_path.name}: {model} on {board}: no size build in this run")
        elif number(got["flash, for size"]) > limit:
            faults.append(
                f"{run_path.name}: {model} on {board}: the size build takes "
                f"{got['flash, for size']} bytes of flash, over the {limit:,} the book promises"
            )
    for fault in faults:
        print(fault, file=sys.stderr)
    print(
        f"check-figures: {len(book)} rows, {len(book_part)} estimates, {len(book_flash)} flash "
        f"and {len(book_size)} speed-or-size rows of {book_path.name} against {run_path.name}: "
        f"{len(faults)} fault(s)"
    )
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
