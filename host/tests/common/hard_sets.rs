//! Hard buffer sets, like MiniMalloc's "challenging" benchmark: a few
//! hundred buffers that fill a capacity × time rectangle almost exactly.
//!
//! Why built this way: a set cut from the rectangle has a perfect packing
//! (every piece where it was cut), so the capacity is reachable by
//! construction, and the lower bound is the capacity itself (every step is
//! covered from 0 to the top). Dropping a few pieces brings the bound a few
//! percent below the capacity while the packing stays. Greedy orders rarely
//! find such packings; a search must.

#![allow(dead_code, unreachable_pub)]

/// One piece: live on `[lower, upper)`, `size` bytes, cut at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub lower: u32,
    pub upper: u32,
    pub offset: u32,
    pub size: u32,
}

/// Deterministic pseudo-random numbers (xorshift64), so a seed names a set.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A cut strictly inside `1..len`, near the middle (a quarter to three
    /// quarters), so pieces stay of comparable size.
    fn cut(&mut self, len: u32) -> u32 {
        let quarter = (len / 4).max(1);
        let span = (len / 2).max(1);
        (quarter + (self.next() % u64::from(span)) as u32).clamp(1, len - 1)
    }
}

/// Cuts `capacity` bytes × `steps` steps into `count` pieces (guillotine
/// cuts of the largest piece, in time or in memory), then drops every piece
/// with probability `drop_percent` / 100. Sizes are multiples of `unit`.
pub fn cut_rectangle(
    seed: u64,
    capacity: u32,
    steps: u32,
    count: usize,
    unit: u32,
    drop_percent: u64,
) -> Vec<Piece> {
    let mut rng = Rng(seed.max(1));
    let mut pieces = vec![Piece {
        lower: 0,
        upper: steps,
        offset: 0,
        size: capacity / unit,
    }];
    while pieces.len() < count {
        let (i, _) = pieces
            .iter()
            .enumerate()
            .max_by_key(|(i, p)| (u64::from(p.upper - p.lower) * u64::from(p.size), *i))
            .expect("at least one piece");
        let p = pieces[i];
        let duration = p.upper - p.lower;
        let in_time = duration >= 2 && (p.size < 2 || rng.next().is_multiple_of(2));
        if in_time {
            let at = p.lower + rng.cut(duration);
            pieces[i].upper = at;
            pieces.push(Piece { lower: at, ..p });
        } else if p.size >= 2 {
            let at = rng.cut(p.size);
            pieces[i].size = at;
            pieces.push(Piece {
                offset: p.offset + at,
                size: p.size - at,
                ..p
            });
        } else {
            break;
        }
    }
    pieces
        .into_iter()
        .filter(|_| rng.next() % 100 >= drop_percent)
        .map(|p| Piece {
            offset: p.offset * unit,
            size: p.size * unit,
            ..p
        })
        .collect()
}

/// The pieces as MiniMalloc's CSV (`id,lower,upper,size`), in an order
/// that hides the cut: by size, largest first.
pub fn to_csv(pieces: &[Piece]) -> String {
    let mut sorted = pieces.to_vec();
    sorted.sort_by_key(|p| (std::cmp::Reverse(p.size), p.lower, p.offset));
    let mut out = String::from("id,lower,upper,size\n");
    for (i, p) in sorted.iter().enumerate() {
        out.push_str(&format!("b{i},{},{},{}\n", p.lower, p.upper, p.size));
    }
    out
}
