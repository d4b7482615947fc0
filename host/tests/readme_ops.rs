//! The book's operator tables (`docs/models-and-operators.md`, once the
//! README's) say what the resolver holds: every operator in hilt's table
//! has a kernel in `all_builtins()`, every one in the TFLM-only list has
//! none, and no kernel is missing from the table.

mod common;

use hilt_runtime::kernels::{Resolver, all_builtins};
use hilt_runtime::model::OpCode;
use hilt_runtime::schema::BuiltinOperator;

/// The book's page that holds the operator tables.
const OPS_PAGE: &str = "docs/models-and-operators.md";

/// The text between `<!-- ops-coverage: NAME -->` and its closing marker.
fn section(page: &str, name: &str) -> String {
    let open = format!("<!-- ops-coverage: {name} -->");
    let close = format!("<!-- /ops-coverage: {name} -->");
    let start = page
        .find(&open)
        .unwrap_or_else(|| panic!("{OPS_PAGE} lacks {open}"))
        + open.len();
    let end = page[start..]
        .find(&close)
        .unwrap_or_else(|| panic!("{OPS_PAGE} lacks {close}"))
        + start;
    page[start..end].to_string()
}

fn code(name: &str) -> BuiltinOperator {
    *BuiltinOperator::ENUM_VALUES
        .iter()
        .find(|op| op.variant_name() == Some(name))
        .unwrap_or_else(|| panic!("{name:?} is not a TFLite builtin"))
}

#[test]
fn the_books_operator_tables_match_the_resolver() {
    let page = std::fs::read_to_string(common::repo().join(OPS_PAGE))
        .unwrap_or_else(|e| panic!("{OPS_PAGE}: {e}"));
    let hilt_ops: Vec<String> = section(&page, "hilt")
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .filter(|name| !matches!(*name, "operator" | "---"))
        .map(|name| name.trim().to_string())
        .filter(|name| !name.starts_with('-'))
        .collect();
    let tflm_only: Vec<String> = section(&page, "tflm-only")
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    assert!(
        hilt_ops.len() > 20 && tflm_only.len() > 20,
        "{hilt_ops:?} {tflm_only:?}"
    );
    let resolver = all_builtins();
    let has = |name: &str| resolver.find(OpCode::Builtin(code(name))).is_some();
    for op in &hilt_ops {
        assert!(
            has(op),
            "{OPS_PAGE} says hilt runs {op}, but all_builtins has no kernel for it"
        );
        assert!(!tflm_only.contains(op), "{op} is in both tables");
    }
    for op in &tflm_only {
        assert!(
            !has(op),
            "{OPS_PAGE} lists {op} as TFLM-only, but hilt has a kernel: move it"
        );
    }
    for op in BuiltinOperator::ENUM_VALUES {
        if resolver.find(OpCode::Builtin(*op)).is_some() {
            let name = op.variant_name().unwrap();
            assert!(
                hilt_ops.iter().any(|o| o == name),
                "all_builtins runs {name}: add it to the operator table of {OPS_PAGE}"
            );
        }
    }
}
