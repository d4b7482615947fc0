//! Rewrites `scenarios/models/*.tflite` from `hilt_runtime::writer::examples`.

fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/models");
    std::fs::create_dir_all(&dir)?;
    for (name, bytes) in hilt_runtime::writer::examples::all() {
        let path = dir.join(name);
        std::fs::write(&path, &bytes)?;
        println!("wrote {} ({} bytes)", path.display(), bytes.len());
    }
    Ok(())
}
