//! Short labels for a plan's buffers: the part of each tensor name that
//! tells it apart from the others.
//!
//! Converted models name tensors by the Keras or TF path of the ops fused
//! into them, joined with `;`: `model/activation_3/Relu;model/batch_
//! normalization_3/FusedBatchNormV3;model/depthwise_conv2d_1/depthwise;…`.
//! Cut to a box's width every label reads `model/ac…`. So a label is the
//! tensor index and the name's first `;` part (the op that wrote the
//! tensor) without the path prefix most names share (`model/`), e.g.
//! `#61 activation_3/Relu`; the full name goes in the box's hover text.
//!
//! ```
//! use hilt::buffer_labels::{distinct_parts, fit};
//!
//! let names = ["input_1", "model/conv2d/Relu;model/conv2d/BiasAdd", "model/conv2d_1/Relu"];
//! assert_eq!(distinct_parts(&names), ["input_1", "conv2d/Relu", "conv2d_1/Relu"]);
//! // Too long for the box: the trailing path parts go first, then the middle.
//! assert_eq!(fit("conv2d_1/Relu", 8), "conv2d_1");
//! assert_eq!(fit("depthwise_conv2d_11/Relu", 12), "depthwi…d_11");
//! ```

/// The character that marks a cut.
const ELLIPSIS: char = '…';

/// For each name: its first `;` part without the longest `/`-ended path
/// prefix it shares with at least half the names (and at least one other).
pub fn distinct_parts<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    let primary: Vec<&str> = names
        .iter()
        .map(|n| n.as_ref().split(';').next().unwrap_or(""))
        .collect();
    let shared = shared_prefixes(&primary);
    primary
        .iter()
        .map(|name| {
            let strip = shared
                .iter()
                .filter(|p| name.starts_with(p.as_str()) && name.len() > p.len())
                .map(String::len)
                .max()
                .unwrap_or(0);
            name[strip..].to_string()
        })
        .collect()
}

/// The `/`-ended prefixes that at least half of `names`, and at least two,
/// start with.
fn shared_prefixes(names: &[&str]) -> Vec<String> {
    let need = names.len().div_ceil(2).max(2);
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for name in names {
        for (at, _) in name.match_indices('/') {
            *counts.entry(&name[..=at]).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .filter(|&(_, n)| n >= need)
        .map(|(p, _)| p.to_string())
        .collect()
}

/// `text` in at most `max_chars` characters: whole when it fits, else its
/// first `/` part (the layer, where converted names differ), cut in the
/// middle when even that is too long: its start and its end stay, as the
/// numbers that tell layers apart are at the end.
pub fn fit(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let first = match text.split_once('/') {
        Some((first, _)) if !first.is_empty() => first,
        _ => text,
    };
    let count = first.chars().count();
    if count <= max_chars {
        return first.to_string();
    }
    if max_chars < 3 {
        return first.chars().take(max_chars).collect();
    }
    let keep = max_chars - 1;
    let tail = keep * 2 / 5;
    let head: String = first.chars().take(keep - tail).collect();
    let end: String = first.chars().skip(count - tail).collect();
    format!("{head}{ELLIPSIS}{end}")
}

/// Fewest characters of a name part worth showing beside the index: fewer
/// read as noise (`ac…4`).
const MIN_PART: usize = 6;

/// A box's label in at most `max_chars`: `#INDEX PART` for a tensor (only
/// the index when fewer than [`MIN_PART`] characters are left for the part),
/// the whole name for anything else (scratch), cut to fit.
pub fn box_label(tensor: Option<u32>, part: &str, max_chars: usize) -> String {
    let Some(index) = tensor else {
        return fit(part, max_chars);
    };
    let index = format!("#{index}");
    let room = max_chars.saturating_sub(index.chars().count() + 1);
    if room >= MIN_PART && !part.is_empty() {
        format!("{index} {}", fit(part, room))
    } else {
        fit(&index, max_chars)
    }
}

/// A box's label over at most `max_lines` lines of `max_chars`: on one line
/// when it fits whole, else the index on the first line and the part
/// wrapped after `/` and `_` below it (a tall narrow box, the usual shape
/// of an activation in a deep model, shows the whole name that way); the
/// last line ends in an ellipsis when even that is too little room.
pub fn box_lines(
    tensor: Option<u32>,
    part: &str,
    max_chars: usize,
    max_lines: usize,
) -> Vec<String> {
    if max_lines == 0 || max_chars == 0 {
        return Vec::new();
    }
    let one_line = box_label(tensor, part, max_chars);
    let whole = match tensor {
        Some(t) => format!("#{t} {part}"),
        None => part.to_string(),
    };
    if max_lines == 1 || one_line == whole {
        return vec![one_line];
    }
    let mut lines = Vec::new();
    if let Some(t) = tensor {
        lines.push(fit(&format!("#{t}"), max_chars));
    }
    let room = max_lines - lines.len();
    let mut wrapped = wrap(part, max_chars);
    if wrapped.len() > room {
        wrapped.truncate(room);
        if let Some(last) = wrapped.last_mut() {
            let mut cut: String = last.chars().take(max_chars.saturating_sub(1)).collect();
            cut.push(ELLIPSIS);
            *last = cut;
        }
    }
    lines.extend(wrapped);
    lines
}

/// `text` in lines of at most `width` characters, broken after a `/` or
/// `_` where one is near, else anywhere.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for token in text.split_inclusive(['/', '_']) {
        let mut token: Vec<char> = token.chars().collect();
        while !token.is_empty() {
            let used = line.chars().count();
            if used + token.len() <= width {
                line.extend(token.drain(..));
            } else if used > 0 {
                lines.push(std::mem::take(&mut line));
            } else {
                line.extend(token.drain(..width));
                lines.push(std::mem::take(&mut line));
            }
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_shared_prefixes_strip_as_far_as_each_name_shares_them() {
        let names = [
            "MobilenetV1/Logits/AvgPool_1a/AvgPool",
            "MobilenetV1/MobilenetV1/Conv2d_0/Relu6",
            "MobilenetV1/MobilenetV1/Conv2d_1_depthwise/Relu6",
            "MobilenetV1/MobilenetV1/Conv2d_1_pointwise/Relu6",
        ];
        assert_eq!(
            distinct_parts(&names),
            [
                "Logits/AvgPool_1a/AvgPool",
                "Conv2d_0/Relu6",
                "Conv2d_1_depthwise/Relu6",
                "Conv2d_1_pointwise/Relu6"
            ]
        );
    }

    #[test]
    fn unshared_names_and_lone_prefixes_stay_whole() {
        assert_eq!(distinct_parts(&["a/x", "b/y"]), ["a/x", "b/y"]);
        assert_eq!(distinct_parts(&["only/one"]), ["only/one"]);
        // A name that is the prefix itself keeps it.
        assert_eq!(distinct_parts(&["m/", "m/a", "m/b"]), ["m/", "a", "b"]);
        assert_eq!(distinct_parts::<&str>(&[]), Vec::<String>::new());
    }

    #[test]
    fn labels_fit_their_width() {
        assert_eq!(
            box_label(Some(61), "activation_3/Relu", 40),
            "#61 activation_3/Relu"
        );
        assert_eq!(
            box_label(Some(61), "activation_3/Relu", 16),
            "#61 activation_3"
        );
        assert_eq!(box_label(Some(61), "activation_3/Relu", 5), "#61");
        assert_eq!(box_label(Some(12345), "x", 3), "#1…");
        assert_eq!(box_label(None, "scratch(op 3 #0)", 10), "scratc…#0)");
        assert_eq!(
            box_lines(Some(61), "activation_3/Relu", 8, 6),
            ["#61", "activati", "on_3/", "Relu"]
        );
        for width in 0..30 {
            let label = box_label(Some(7), "depthwise_conv2d_11/Relu", width);
            assert!(label.chars().count() <= width, "{width}: {label}");
            for lines in 0..5 {
                let all = box_lines(Some(7), "depthwise_conv2d_11/Relu", width, lines);
                assert!(all.len() <= lines, "{width}x{lines}: {all:?}");
                assert!(all.iter().all(|l| l.chars().count() <= width), "{all:?}");
            }
        }
    }
}
