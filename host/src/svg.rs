//! The arena over time as an SVG picture: x = operator step, y = offset.

use std::fmt::Write as _;

use crate::layout::LayoutReport;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 560.0;
const LEFT: f64 = 80.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 40.0;
const RIGHT: f64 = 20.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Draws one rectangle per buffer (steps across, bytes down from offset 0 at
/// the top), labelled with its tensor index and the part of its name that
/// differs from the others ([`crate::buffer_labels`]; the full name is the
/// hover text), and a dashed line at the lower bound.
pub fn render_svg(report: &LayoutReport, title: &str) -> String {
    let steps = report
        .buffers
        .iter()
        .map(|b| b.last_step + 1)
        .max()
        .unwrap_or(1)
        .max(1);
    let top_bytes = report.head.max(report.lower_bound).max(1);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |step: u32| LEFT + plot_w * f64::from(step) / f64::from(steps);
    let y = |bytes: u32| TOP + plot_h * f64::from(bytes) / f64::from(top_bytes);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="14">{} — {} planner, head {} B, lower bound {} B</text>"#,
        escape(title),
        report.planner,
        report.head,
        report.lower_bound
    );
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#f7f7f7" stroke="#999"/>"##
    );
    draw_buffers(&mut s, report, &x, &y);
    let lb = y(report.lower_bound);
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{lb:.1}" x2="{:.1}" y2="{lb:.1}" stroke="#c00" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" fill="#c00" text-anchor="end">lower bound {} B</text>"##,
        LEFT + plot_w,
        LEFT + plot_w - 4.0,
        lb - 4.0,
        report.lower_bound
    );
    pool_boundaries(&mut s, report, LEFT + plot_w, &y);
    draw_axes(&mut s, steps, top_bytes, &x, &y);
    s.push_str("</svg>\n");
    s
}

/// One box per buffer, with its hover text and, where it fits, its label.
fn draw_buffers(
    s: &mut String,
    report: &LayoutReport,
    x: &impl Fn(u32) -> f64,
    y: &impl Fn(u32) -> f64,
) {
    let parts = label_parts(report);
    for (i, b) in report.buffers.iter().enumerate() {
        let padded = b.size.div_ceil(b.align) * b.align;
        let (x0, x1) = (x(b.first_step), x(b.last_step + 1));
        let (y0, y1) = (y(b.offset), y(b.offset + padded));
        let hue = (i * 47) % 360;
        let fill = if b.kind == "scratch" {
            format!("hsl({hue},20%,70%)")
        } else {
            format!("hsl({hue},60%,72%)")
        };
        let _ = writeln!(
            s,
            r##"<g><title>{}{} [{}..{}] {} B @ {}</title><rect x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="#333" stroke-width="0.5"/>"##,
            b.tensor.map_or_else(String::new, |t| format!("#{t} ")),
            escape(&b.name),
            b.first_step,
            b.last_step,
            b.size,
            b.offset,
            (x1 - x0).max(1.0),
            (y1 - y0).max(1.0)
        );
        if y1 - y0 >= 12.0 && x1 - x0 >= 30.0 {
            let max_chars = ((x1 - x0 - 3.0) / 6.5) as usize;
            let max_lines = ((y1 - y0 - 2.0) / 12.0) as usize;
            let lines = crate::buffer_labels::box_lines(b.tensor, &parts[i], max_chars, max_lines);
            for (k, line) in lines.iter().enumerate() {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                    x0 + 3.0,
                    y0 + 11.0 + 12.0 * k as f64,
                    escape(line)
                );
            }
        }
        let _ = writeln!(s, "</g>");
    }
}

/// The step numbers along the bottom, byte offsets down the left, and the
/// axis names.
fn draw_axes(
    s: &mut String,
    steps: u32,
    top_bytes: u32,
    x: &impl Fn(u32) -> f64,
    y: &impl Fn(u32) -> f64,
) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    for step in 0..=steps {
        if steps <= 40 || step % steps.div_ceil(20) == 0 {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{step}</text>"#,
                x(step),
                HEIGHT - BOTTOM + 14.0
            );
        }
    }
    for k in 0..=4u32 {
        let bytes = (u64::from(top_bytes) * u64::from(k) / 4) as u32;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{bytes}</text>"#,
            LEFT - 6.0,
            y(bytes) + 4.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">operator step</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 8.0
    );
    let _ = writeln!(
        s,
        r#"<text x="14" y="{:.1}" transform="rotate(-90 14 {:.1})" text-anchor="middle">offset (bytes)</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
}

/// A split arena's pools: a line where each pool after the first begins
/// (inside the drawn head), with its name and who reaches it.
fn pool_boundaries(s: &mut String, report: &LayoutReport, right: f64, y: &impl Fn(u32) -> f64) {
    for (k, pool) in report.pools.iter().enumerate() {
        if pool.head_offset > report.head.max(report.lower_bound) {
            continue;
        }
        let at = y(pool.head_offset);
        if k > 0 {
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{at:.1}" x2="{right:.1}" y2="{at:.1}" stroke="#06c" stroke-width="1.5"/>"##
            );
        }
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#06c" text-anchor="end">pool {} ({}): head {} B</text>"##,
            right - 4.0,
            at + 12.0,
            escape(&pool.name),
            pool.reach,
            pool.head
        );
    }
}

/// Each buffer's distinct name part: tensors' names against each other's,
/// other buffers' (scratch) names whole.
fn label_parts(report: &LayoutReport) -> Vec<String> {
    let tensor_names: Vec<&str> = report
        .buffers
        .iter()
        .filter(|b| b.tensor.is_some())
        .map(|b| b.name.as_str())
        .collect();
    let mut parts = crate::buffer_labels::distinct_parts(&tensor_names).into_iter();
    report
        .buffers
        .iter()
        .map(|b| match b.tensor {
            Some(_) => parts.next().unwrap_or_default(),
            None => b.name.clone(),
        })
        .collect()
}
