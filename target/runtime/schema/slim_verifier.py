#!/usr/bin/env python3
"""Rewrites flatc's table verifiers as field lists for one shared verifier.

flatc gives every table its own `run_verifier`, a chain of
`visit_field::<T>(name, slot, required)` calls (and a `visit_union` with a
closure that matches the union's type), and the `flatbuffers` crate inlines
each field's check and its error-trace bookkeeping into it. On a Cortex-M
firmware those verifiers took about 25 KB of flash.

This script replaces the body of each table's `run_verifier` by a call to
`crate::schema::verify::verify_table` with the table's fields, in flatc's
order, as data (`impl Table<'_> { pub(crate) const VERIFY: &[Field] }`):

    visit_field::<i32 / an enum / bool ...>          Field::Scalar(slot, bytes)
    visit_field::<ForwardsUOffset<Vector<'_, i32>>>  Field::Vector(slot, bytes)
    visit_field::<ForwardsUOffset<&str>>             Field::Str(slot)
    visit_field::<ForwardsUOffset<T>>                Field::Table(slot, T::VERIFY)
    visit_field::<ForwardsUOffset<Vector<'_, ForwardsUOffset<T>>>>
                                                     Field::Tables(slot, T::VERIFY)
    visit_union (each `K::V => verify_union_variant::<ForwardsUOffset<T>>`)
                                                     Field::Union { key, value, variants }

Anything else (a required field, a type it cannot read) stops the script
with an error, so a schema change cannot slip past it unchecked.

Usage: slim_verifier.py GENERATED_RS (flatc's output, rewritten in place).
"""

import re
import sys

# Bytes of each scalar type flatc's Rust code names; enums are added from
# their `pub struct Name(pub i8);` declarations.
SCALAR_BYTES = {
    "bool": 1, "i8": 1, "u8": 1,
    "i16": 2, "u16": 2,
    "i32": 4, "u32": 4, "f32": 4,
    "i64": 8, "u64": 8, "f64": 8,
}

FIELD = "crate::schema::verify::Field"
IMPL = re.compile(r"impl ::flatbuffers::Verifiable for (\w+)<'_> \{")


def fail(message):
    sys.exit(f"slim_verifier.py: {message}")


def enum_sizes(text):
    sizes = dict(SCALAR_BYTES)
    for name, repr_ in re.findall(r"pub struct (\w+)\(pub (\w+)\);", text):
        if repr_ in SCALAR_BYTES:
            sizes[name] = SCALAR_BYTES[repr_]
    return sizes


def type_argument(body, start):
    """The text between the `<` at `start` and its matching `>`, and the
    index after it."""
    depth, i = 0, start
    while True:
        c = body[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                return body[start + 1:i], i + 1
        i += 1


def field_of(table, ty, slot, sizes):
    t = re.sub(r"\s+", "", ty).replace("::flatbuffers::", "").replace(",>", ">")
    m = re.fullmatch(r"ForwardsUOffset<Vector<'_,ForwardsUOffset<(\w+)>>>", t)
    if m:
        return f"{FIELD}::Tables({table}::{slot}, {m.group(1)}::VERIFY)"
    m = re.fullmatch(r"ForwardsUOffset<Vector<'_,(\w+)>>", t)
    if m and m.group(1) in sizes:
        return f"{FIELD}::Vector({table}::{slot}, {sizes[m.group(1)]})"
    if t == "ForwardsUOffset<&str>":
        return f"{FIELD}::Str({table}::{slot})"
    m = re.fullmatch(r"ForwardsUOffset<(\w+)>", t)
    if m:
        return f"{FIELD}::Table({table}::{slot}, {m.group(1)}::VERIFY)"
    if t in sizes:
        return f"{FIELD}::Scalar({table}::{slot}, {sizes[t]})"
    fail(f"{table}.{slot}: cannot read the field type `{ty}`")


def union_of(table, body, start, end):
    """The Field::Union for the `visit_union` call in body[start:end]."""
    call = body[start:end]
    slots = re.findall(r"Self::(VT_\w+)", call[:call.find("|")])
    if len(slots) != 2:
        fail(f"{table}: a union without its two slots")
    if not re.search(r"Self::VT_\w+,\s*false,\s*\|", call):
        fail(f"{table}: a required union")
    variants = re.findall(
        r"(\w+)::(\w+) => v\.verify_union_variant::<::flatbuffers::ForwardsUOffset<(\w+)>>",
        call,
    )
    arms = len(re.findall(r"=>", call))
    # Every arm but the catch-all `_ => Ok(())` names a table.
    if arms != len(variants) + 1 or "_ => Ok(())" not in call:
        fail(f"{table}: a union arm this script cannot read")
    listed = ", ".join(f"({k}::{v}.0, {t}::VERIFY)" for k, v, t in variants)
    return (
        f"{FIELD}::Union {{ key: {table}::{slots[0]}, "
        f"value: {table}::{slots[1]}, variants: &[{listed}] }}"
    )


def fields_of(table, body, sizes):
    fields = []
    i = 0
    while True:
        f = body.find(".visit_field::<", i)
        u = body.find(".visit_union::<", i)
        if f < 0 and u < 0:
            break
        if u >= 0 and (f < 0 or u < f):
            end = body.find("})?", u)
            fields.append(union_of(table, body, u, end))
            i = end
            continue
        ty, after = type_argument(body, f + len(".visit_field::"))
        m = re.match(r"\(\s*\"\w+\",\s*Self::(VT_\w+),\s*(\w+),?\s*\)\?", body[after:])
        if not m:
            fail(f"{table}: a field call this script cannot read near `{body[after:after + 60]}`")
        if m.group(2) != "false":
            fail(f"{table}.{m.group(1)}: a required field")
        fields.append(field_of(table, ty, m.group(1), sizes))
        i = after + m.end()
    return fields


def main(path):
    text = open(path).read()
    sizes = enum_sizes(text)
    out, at, tables = [], 0, 0
    for m in IMPL.finditer(text):
        table = m.group(1)
        start = text.index("v.visit_table(pos)?", m.end())
        finish = text.index(".finish();", start)
        close = text.index("\n    }\n", finish) + len("\n    }\n")
        fields = fields_of(table, text[start:finish], sizes)
        listed = ",\n".join(f"            {f}" for f in fields)
        out.append(text[at:m.start()])
        out.append(
            f"impl ::flatbuffers::Verifiable for {table}<'_> {{\n"
            f"        #[inline]\n"
            f"        fn run_verifier(\n"
            f"            v: &mut ::flatbuffers::Verifier,\n"
            f"            pos: usize,\n"
            f"        ) -> Result<(), ::flatbuffers::InvalidFlatbuffer> {{\n"
            f"            crate::schema::verify::verify_table(v, pos, {table}::VERIFY)\n"
            f"        }}\n"
            f"    }}\n"
            f"    impl {table}<'_> {{\n"
            f"        /// The fields the verifier checks, in flatc's order\n"
            f"        /// (`schema/slim_verifier.py`).\n"
            f"        pub(crate) const VERIFY: &'static [{FIELD}] = &[\n{listed}\n        ];\n"
            f"    }}\n"
        )
        at = close
        tables += 1
    out.append(text[at:])
    if tables == 0:
        fail("no table verifiers found: is this flatc's output?")
    open(path, "w").write("".join(out))
    print(f"slim_verifier.py: {tables} table verifiers as field lists")


if __name__ == "__main__":
    main(sys.argv[1])
