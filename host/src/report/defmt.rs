//! The defmt log of a run in `report.html`: a table of the lines the host
//! decoded (the firmware's timestamp, the level, the message, the log
//! statement's place when the ELF says), then what could not be decoded.

use std::fmt::Write as _;

use super::escape_text;
use crate::outcome::BoardRun;

/// The run's defmt log as a collapsible table (open when it holds an
/// error line or a problem); empty when the firmware has no defmt log.
pub(super) fn defmt_section(run: &BoardRun) -> String {
    let Some(log) = &run.defmt else {
        return String::new();
    };
    let n = log.lines.len();
    let alarming = !log.problems.is_empty() || log.lines.iter().any(|l| l.level == Some("error"));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<details class=\"defmt\"{}><summary>defmt log ({n} line{}; timestamps: the firmware's <code>defmt::timestamp!</code>)</summary>",
        if alarming { " open" } else { "" },
        if n == 1 { "" } else { "s" }
    );
    if n > 0 {
        s.push_str("<table class=\"defmt\">\n<tr><th>time</th><th>level</th><th>message</th><th>where</th></tr>\n");
    }
    for line in &log.lines {
        let level = line.level.unwrap_or("print");
        let _ = writeln!(
            s,
            "<tr class=\"lvl-{level}\"><td class=\"ts\">{}</td><td class=\"lvl\">{}</td><td class=\"msg\">{}</td><td class=\"at\">{}</td></tr>",
            escape_text(line.timestamp.as_deref().unwrap_or("")),
            level.to_uppercase(),
            escape_text(&line.message),
            escape_text(line.location.as_deref().unwrap_or("")),
        );
    }
    if n > 0 {
        s.push_str("</table>\n");
    }
    for problem in &log.problems {
        let _ = writeln!(
            s,
            "<p class=\"defmt-problem\">hilt: {}</p>",
            escape_text(problem)
        );
    }
    s.push_str("</details>\n");
    s
}
