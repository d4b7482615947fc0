fn main() {
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).unwrap();
        let model = hilt_runtime::model::Model::from_bytes(&bytes).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for op in model.operators() {
            let ty = |t: Option<u32>| {
                t.and_then(|t| model.tensor(t))
                    .map_or("-".to_string(), |t| {
                        format!(
                            "{:?}{}",
                            t.dtype,
                            if t.constant.is_some() {
                                "c"
                            } else if t.is_variable {
                                "v"
                            } else {
                                ""
                            }
                        )
                    })
            };
            let ins: Vec<_> = op.inputs().map(ty).collect();
            let outs: Vec<_> = op.outputs().map(ty).collect();
            let key = format!(
                "{} v{} in[{}] out[{}] opts={:?}",
                op.code,
                op.version,
                ins.join(","),
                outs.join(","),
                op.raw().builtin_options_type()
            );
            seen.insert(key);
        }
        println!("== {}", path.rsplit('/').next().unwrap());
        for s in seen {
            println!("  {s}");
        }
    }
}
