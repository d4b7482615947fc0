//! `hilt layout --format svg` labels each box by tensor index and the part
//! of its name the others do not share, with the full name on hover.

mod common;

use hilt::layout::{LayoutOptions, layout_bytes, layout_file};
use hilt::svg::render_svg;
use hilt_runtime::schema::{BuiltinOperator, TensorType};
use hilt_runtime::writer::{ModelWriter, Options};

/// The label texts (`<text>` outside the axes) and hover texts of a picture.
fn texts(svg: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    svg.split(&open)
        .skip(1)
        .filter_map(|rest| {
            let body = &rest[rest.find('>')? + 1..];
            Some(body[..body.find(&close)?].to_string())
        })
        .collect()
}

/// Names as a converter writes them: the ops fused into each tensor, joined
/// with `;`, every one under `model/`.
fn converted_name(i: u32) -> String {
    let n = if i == 0 {
        String::new()
    } else {
        format!("_{i}")
    };
    format!(
        "model/activation{n}/Relu;model/batch_normalization{n}/FusedBatchNormV3;model/conv2d{n}/BiasAdd"
    )
}

#[test]
fn converted_names_are_labelled_by_index_and_layer() {
    let mut w = ModelWriter::new();
    let mut prev = w.input("input_1_int8", TensorType::INT8, &[1, 64]);
    for i in 0..4 {
        let next = if i == 3 {
            w.output(&converted_name(i), TensorType::INT8, &[1, 64])
        } else {
            w.tensor(&converted_name(i), TensorType::INT8, &[1, 64])
        };
        w.op(BuiltinOperator::RELU, &[Some(prev)], &[next], Options::None);
        prev = next;
    }
    let report = layout_bytes(&w.finish(), &LayoutOptions::default()).unwrap();
    let svg = render_svg(&report, "converted");
    let labels = texts(&svg, "text");
    for want in [
        "#0 input_1_int8",
        "#1 activation/Relu",
        "#2 activation_1/Relu",
        "#4 activation_3/Relu",
    ] {
        assert!(
            labels.iter().any(|l| l == want),
            "no label {want:?} in {labels:?}"
        );
    }
    assert!(
        !labels.iter().any(|l| l.starts_with("model/")),
        "{labels:?}"
    );
    // The full name is the hover text.
    let titles = texts(&svg, "title");
    let full = format!("#3 {}", converted_name(2));
    assert!(titles.iter().any(|t| t.starts_with(&full)), "{titles:?}");
}

#[test]
fn vww_boxes_show_their_layer_and_hover_the_full_name() {
    let Some((dir, models)) = common::conformance_models() else {
        return;
    };
    let name = "mlperf_tiny_vww_mobilenetv1_int8";
    let Some(entry) = models.iter().find(|m| m.name == name) else {
        return;
    };
    let report = layout_file(&dir.join(&entry.model), &LayoutOptions::default()).unwrap();
    let svg = render_svg(&report, name);
    let labels = texts(&svg, "text");
    assert!(
        !labels.iter().any(|l| l.starts_with("model/ac")),
        "{labels:?}"
    );
    // Tall narrow boxes wrap: an index line, then the layer's name.
    let at = labels
        .iter()
        .position(|l| l == "#60")
        .expect("#60 labelled");
    assert!(
        labels[at + 1].starts_with("activ"),
        "{:?}",
        &labels[at..at + 3]
    );
    let titles = texts(&svg, "title");
    for row in report.buffers.iter().filter(|b| b.tensor.is_some()) {
        let hover = format!("#{} {}", row.tensor.unwrap(), row.name);
        assert!(titles.iter().any(|t| t.starts_with(&hover)), "{hover}");
    }
}
