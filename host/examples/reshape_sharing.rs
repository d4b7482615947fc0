//! Prints, for every model of the conformance sets, what planning RESHAPE,
//! SQUEEZE and EXPAND_DIMS in place would save (`hilt::reshape_sharing`):
//!
//! ```text
//! cargo run --release -p hilt --example reshape_sharing
//! ```
//!
//! The sets are `HILT_CONFORMANCE_DIR` (`:`-separated), else the two beside
//! the repository.

use std::path::Path;

fn main() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    println!(
        "| model | shape-only ops | bytes copied per invoke | greedy head | head if shared | saved |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for set in hilt::conformance::locate_all(&repo) {
        let manifest = match hilt::conformance::read_manifest(&set) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("skipped: {e}");
                continue;
            }
        };
        for entry in manifest.models {
            let path = set.join(&entry.model);
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("{}: {e}", path.display());
                    continue;
                }
            };
            let model = match hilt_runtime::model::Model::from_bytes(&bytes) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("{}: {e}", entry.name);
                    continue;
                }
            };
            match hilt::reshape_sharing::measure(&model, 16) {
                Ok(f) if f.shared_ops > 0 => println!(
                    "| {} | {} | {} | {} | {} | {} |",
                    entry.name,
                    f.shared_ops,
                    f.copied_bytes,
                    f.head,
                    f.shared_head,
                    i64::from(f.head) - i64::from(f.shared_head)
                ),
                Ok(_) => {}
                Err(e) => eprintln!("{}: {e}", entry.name),
            }
        }
    }
}
