#!/usr/bin/env python3
"""hilt's checks on its documentation that MkDocs does not make
(ci/check-docs.sh runs this after `mkdocs build --strict`):

- every relative link in README.md names an existing file, and a link into
  docs/ with an anchor names an id of the page built from it (the built
  book, --book, is where MkDocs put the headings' ids);
- every `hilt SUBCOMMAND` shown (in ```console / ```sh / ```bash / ```shell
  blocks and in inline code, in README.md and docs/**/*.md) is a
  subcommand of hilt's `Command` enum (host/src/main.rs, or wherever
  `enum Command` lives under host/src/);
- every `ci/NAME.sh` or `ci/NAME.py` named anywhere in them exists, and
  every `cargo ... --test NAME` / `--bench NAME` / `--example NAME` shown
  names a tests/NAME.rs, benches/NAME.rs or examples/NAME.rs of the
  repository.

Prints one line per fault and exits 1 if there is any.
"""

import argparse
import html.parser
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
COMMAND_BLOCKS = {"console", "sh", "bash", "shell"}


def markdown_files():
    files = [REPO / "README.md"]
    files += sorted((REPO / "docs").rglob("*.md"))
    return files


def hilt_subcommands():
    """Kebab-case names of the variants of `enum Command` under host/src."""
    for path in sorted((REPO / "host" / "src").rglob("*.rs")):
        text = path.read_text(encoding="utf-8")
        match = re.search(r"^(?:pub(?:\([^)]*\))? )?enum Command \{\n", text, re.M)
        if not match:
            continue
        names, depth = [], 1
        for line in text[match.end():].splitlines():
            if depth == 1:
                variant = re.match(r"    ([A-Z][A-Za-z0-9]*)\s*[{(,]?", line)
                if variant and not line.strip().startswith(("#", "//")):
                    names.append(re.sub(r"(?<!^)([A-Z])", r"-\1", variant.group(1)).lower())
            depth += line.count("{") - line.count("}")
            if depth <= 0:
                break
        if names:
            return path, set(names)
    sys.exit("check-docs: no `enum Command` under host/src")


def code_blocks(text):
    """(language, line number, body lines) of every fenced block."""
    blocks, lang, start, body = [], None, 0, []
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"\s*```(\S*)", line)
        if fence and lang is None:
            lang, start, body = fence.group(1), number, []
        elif fence:
            blocks.append((lang, start, body))
            lang = None
        elif lang is not None:
            body.append((number, line))
    return blocks


def shown_commands(text):
    """(line number, command text) of what the page shows as commands:
    console lines after `$ `, sh lines without their comments, and inline
    code spans that start with `hilt ` or `cargo `."""
    commands = []
    for lang, _, body in code_blocks(text):
        if lang not in COMMAND_BLOCKS:
            continue
        for number, line in body:
            if lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            line = re.sub(r"(^|\s)#.*", "", line)
            commands.append((number, line))
    outside = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for number, line in enumerate(outside.splitlines(), 1):
        for span in re.findall(r"`([^`]+)`", line):
            if span.startswith(("hilt ", "cargo ")):
                commands.append((number, span))
    return commands


class Ids(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)


def page_ids(book, page):
    built = book / (str(pathlib.PurePosixPath(page).with_suffix(".html")))
    if not built.is_file():
        return None
    parser = Ids()
    parser.feed(built.read_text(encoding="utf-8"))
    return parser.ids


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--book", type=pathlib.Path, default=REPO / "build" / "book")
    args = parser.parse_args()
    book = args.book if args.book.is_absolute() else REPO / args.book
    faults = []

    # The README's links.
    readme = REPO / "README.md"
    text = readme.read_text(encoding="utf-8")
    outside = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    links, into_book = 0, 0
    for number, line in enumerate(outside.splitlines(), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            links += 1
            into_book += target.startswith("docs/")
            path, _, anchor = target.partition("#")
            where = f"README.md:{number}: link {target}"
            if not (REPO / path).exists():
                faults.append(f"{where}: no file {path}")
                continue
            if anchor:
                if not path.startswith("docs/") or not path.endswith(".md"):
                    faults.append(f"{where}: anchors are checked only into docs/*.md")
                    continue
                ids = page_ids(book, path[len("docs/"):])
                if ids is None:
                    faults.append(f"{where}: {path} is not in the built book")
                elif anchor not in ids:
                    faults.append(f"{where}: {path} has no anchor #{anchor}")
    if into_book == 0:
        faults.append("README.md: no link into the book (docs/)")

    # The commands shown.
    enum_file, subcommands = hilt_subcommands()
    shown = 0
    for page in markdown_files():
        name = page.relative_to(REPO)
        text = page.read_text(encoding="utf-8")
        for number, command in shown_commands(text):
            # `cargo test -p hilt --test probe` names a package, not the CLI.
            cli = re.sub(r"(?:-p|--package)[\s=]+[\w-]+", "", command)
            for sub in re.findall(r"(?:^|[\s;&|(/])hilt((?:\s+-[-\w]+)*)\s+([a-z][\w-]*)", cli):
                shown += 1
                if sub[1] not in subcommands:
                    faults.append(
                        f"{name}:{number}: `hilt {sub[1]}` is no subcommand of hilt"
                        f" ({enum_file.relative_to(REPO)}: {', '.join(sorted(subcommands))})"
                    )
            for kind, folder in (("test", "tests"), ("bench", "benches"), ("example", "examples")):
                for target in re.findall(rf"--{kind}\s+([\w-]+)", command):
                    if not any(
                        any(base.glob(f"**/{folder}/{target}{tail}"))
                        for base in (REPO / "host", REPO / "target")
                        for tail in (".rs", "/main.rs")
                    ):
                        faults.append(f"{name}:{number}: `--{kind} {target}`: no {folder}/{target}.rs")
        for number, line in enumerate(text.splitlines(), 1):
            for script in re.findall(r"(?<![\w/.-])(ci/[\w.-]+\.(?:sh|py))", line):
                if not (REPO / script).is_file():
                    faults.append(f"{name}:{number}: {script} does not exist")
    if shown == 0:
        faults.append("no `hilt SUBCOMMAND` found in README.md or docs/: the check reads nothing")

    for fault in faults:
        print(fault, file=sys.stderr)
    print(
        f"check-docs: {links} README links checked, {shown} hilt commands against"
        f" {len(subcommands)} subcommands: {len(faults)} fault(s)"
    )
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
