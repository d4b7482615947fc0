//! Rust source read as text by the tests that check the code's shape
//! (`module_graph.rs`, `room_sizes.rs`): what is code once comments and
//! literals are blanked out.

/// `text` with comments and string, byte-string and char literals blanked
/// out (newlines kept, so lines still count): what is left is code.
pub fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && !chars[..i].last().is_some_and(|&p| is_ident(p))
            && raw_string_start(&chars[i..]).is_some()
        {
            // r"…", r#"…"#, br"…": ends at `"` and as many `#`.
            let (prefix, hashes) = raw_string_start(&chars[i..]).unwrap();
            i += prefix;
            out.extend(std::iter::repeat_n(' ', prefix));
            while i < chars.len() {
                if chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|&h| h == '#') {
                    let end = (i + 1 + hashes).min(chars.len());
                    out.extend(std::iter::repeat_n(' ', end - i));
                    i = end;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let skip = if chars[i] == '\\' { 2 } else { 1 };
                for &s in &chars[i..(i + skip).min(chars.len())] {
                    out.push(blank(s));
                }
                i += skip;
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && char_literal_len(&chars[i..]).is_some() {
            let len = char_literal_len(&chars[i..]).unwrap();
            out.extend(std::iter::repeat_n(' ', len));
            i += len;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

pub fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `r"`, `r#"`, `br##"`, …: the prefix's length and its `#` count.
fn raw_string_start(chars: &[char]) -> Option<(usize, usize)> {
    let mut i = usize::from(chars.first() == Some(&'b'));
    (chars.get(i) == Some(&'r')).then_some(())?;
    i += 1;
    let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
    i += hashes;
    (chars.get(i) == Some(&'"')).then_some((i + 1, hashes))
}

/// The length of a char literal at the start of `chars` (`'a'`, `'\n'`,
/// `'\u{1F600}'`), `None` for a lifetime or label (`'a`, `'static`).
fn char_literal_len(chars: &[char]) -> Option<usize> {
    match chars.get(1)? {
        '\\' => {
            // The escaped char, then up to the closing quote (`'\u{…}'`).
            let close = chars.iter().skip(3).position(|&c| c == '\'')?;
            Some(close + 4)
        }
        _ => (chars.get(2) == Some(&'\'')).then_some(3),
    }
}
