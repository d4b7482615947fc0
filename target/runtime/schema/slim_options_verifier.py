#!/usr/bin/env python3
"""Rewrites flatc's verifier of Operator.builtin_options so that an options
table whose fields are all scalars is checked from a list of (vtable slot,
byte size) pairs by one shared function (`crate::schema::verify_scalar_table`)
instead of a verifier of its own.

flatc gives every options table its own `run_verifier`, and the union's
match inlines each of them with its error-trace bookkeeping: about 31 KB of a
Cortex-M firmware's flash, whichever operators the firmware links. A scalar
field is verified by its size alone (in the buffer, aligned to its size), so
the list holds everything the generated verifier checked. Tables with a
vector, string or sub-table keep flatc's verifier.

Usage: slim_options_verifier.py GENERATED_RS (rewritten in place; running it
again changes nothing).
"""

import re
import sys

# Bytes of each scalar type flatc's Rust code names in `visit_field::<T>`;
# enums are added from their `pub struct Name(pub i8);` declarations.
SCALAR_BYTES = {
    "bool": 1, "i8": 1, "u8": 1,
    "i16": 2, "u16": 2,
    "i32": 4, "u32": 4, "f32": 4,
    "i64": 8, "u64": 8, "f64": 8,
}


def enum_sizes(text):
    sizes = {}
    for name, repr_ in re.findall(r"pub struct (\w+)\(pub (\w+)\);", text):
        if repr_ in SCALAR_BYTES:
            sizes[name] = SCALAR_BYTES[repr_]
    return sizes


def table_fields(text, table, sizes):
    """The (VT constant, bytes) of `table`'s fields, or None if any field
    is not a scalar."""
    start = text.find(f"impl ::flatbuffers::Verifiable for {table}<'_> {{")
    if start < 0:
        return None
    end = text.find(".finish();", start)
    body = text[start:end]
    fields = []
    for ty, vt in re.findall(
        r"\.visit_field::<(.+?)>\(\s*\"\w+\",\s*Self::(VT_\w+),", body, re.S
    ):
        if ty not in sizes:
            return None
        fields.append((vt, sizes[ty]))
    if len(fields) != body.count(".visit_field::<"):
        return None  # a field this script could not read: keep flatc's
    return fields


def main(path):
    text = open(path).read()
    sizes = dict(SCALAR_BYTES)
    sizes.update(enum_sizes(text))
    arm = re.compile(
        r"BuiltinOptions::(\w+) => v\.verify_union_variant::<"
        r"::flatbuffers::ForwardsUOffset<(\w+)>>\(\"BuiltinOptions::\w+\", pos\),"
    )

    def rewrite(m):
        variant, table = m.group(1), m.group(2)
        fields = table_fields(text, table, sizes)
        if fields is None:
            return m.group(0)
        pairs = ", ".join(f"({table}::{vt}, {n})" for vt, n in fields)
        return (
            f"BuiltinOptions::{variant} => "
            f"crate::schema::verify_scalar_table(v, pos, &[{pairs}]),"
        )

    slim = arm.sub(rewrite, text)
    open(path, "w").write(slim)


if __name__ == "__main__":
    main(sys.argv[1])
