//! "Did you mean": the names closest to a misspelt one, for the errors that
//! name an unknown board or an unknown key of a board or scenario file.

/// Levenshtein distance between `a` and `b`, in characters.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The candidates nearest `name` (all of those at the smallest distance),
/// when near enough to be a typo: at most a third of the longer name's
/// characters differ (at least 2 edits allowed). Empty when none is.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut best: Vec<&str> = Vec::new();
    let mut best_distance = usize::MAX;
    for candidate in candidates {
        let d = distance(name, candidate);
        let limit = (name.chars().count().max(candidate.chars().count()) / 3).max(2);
        if d > limit || d > best_distance {
            continue;
        }
        if d < best_distance {
            best.clear();
            best_distance = d;
        }
        if !best.contains(&candidate) {
            best.push(candidate);
        }
    }
    best
}

/// ` (did you mean a or b?)` for [`closest`]'s names, or nothing.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    let near = closest(name, candidates);
    if near.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", near.join(" or "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("qemu-mps2-an368", "qemu-mps2-an386"), 2);
        assert_eq!(distance("same", "same"), 0);
    }

    #[test]
    fn closest_keeps_typos_and_drops_strangers() {
        let boards = ["qemu-mps2-an386", "qemu-mps2-an500", "nrf52840-dk"];
        assert_eq!(closest("qemu-mps2-an368", boards), ["qemu-mps2-an386"]);
        assert!(closest("esp32", boards).is_empty());
        assert_eq!(
            did_you_mean("timout_s", ["timeout_s", "model"]),
            " (did you mean timeout_s?)"
        );
        assert_eq!(did_you_mean("zzz", ["timeout_s"]), "");
    }
}
