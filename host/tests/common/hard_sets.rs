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

    /// A number in `0..n`.
    fn below(&mut self, n: u32) -> u32 {
        (self.next() % u64::from(n.max(1))) as u32
    }

    /// A number from `low` to `high`, its logarithm uniform.
    fn log_uniform(&mut self, low: f64, high: f64) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (low.ln() + u * (high.ln() - low.ln())).exp()
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

/// A flat stretch of the skyline: sections `[start, end)` filled to
/// `height` units.
#[derive(Debug, Clone, Copy)]
struct Flat {
    start: u32,
    end: u32,
    height: u32,
}

/// Drops pieces onto a skyline until `capacity` is full everywhere, the
/// way MiniMalloc's challenging sets look: time cut into `sections`
/// sections of random length (1,024 steps a unit, 1 Mi steps in all),
/// each piece resting on one flat stretch of what is already placed
/// (chosen at random, not the lowest: the packing is no greedy order's),
/// its length log-uniform from one section to all of them and its size
/// log-uniform from 0.2% to 65% of the capacity (the last piece of a
/// stretch takes what is left). The packing is then turned upside down
/// (what rested on others now hangs from the top) and `drop_percent` of
/// the pieces are dropped. Sizes are multiples of `unit`.
pub fn drop_on_skyline(
    seed: u64,
    capacity: u32,
    sections: u32,
    unit: u32,
    drop_percent: u64,
) -> Vec<Piece> {
    let mut rng = Rng(seed.max(1));
    let units = capacity / unit;
    // Section boundaries: distinct cut points in 1..1024, in order.
    let mut cuts: Vec<u32> = Vec::new();
    while cuts.len() + 1 < sections as usize {
        let at = 1 + rng.below(1023);
        if !cuts.contains(&at) {
            cuts.push(at);
        }
    }
    cuts.push(0);
    cuts.push(1024);
    cuts.sort_unstable();
    let mut flats = vec![Flat {
        start: 0,
        end: sections,
        height: 0,
    }];
    let mut placed: Vec<(u32, u32, u32, u32)> = Vec::new();
    let smallest = ((units as f64 * 0.002) as u32).max(1);
    loop {
        let open: Vec<usize> = (0..flats.len())
            .filter(|&k| flats[k].height < units)
            .collect();
        if open.is_empty() {
            break;
        }
        let flat = flats[open[rng.below(open.len() as u32) as usize]];
        let width = flat.end - flat.start;
        let len = (rng.log_uniform(1.0, f64::from(sections)).round() as u32).clamp(1, width);
        let start = flat.start + rng.below(width - len + 1);
        let room = units - flat.height;
        let mut size = ((rng.log_uniform(0.002, 0.65) * f64::from(units)) as u32).max(1);
        if size >= room || room - size < smallest {
            size = room;
        }
        placed.push((start, start + len, flat.height, size));
        let mut next = Vec::with_capacity(flats.len() + 2);
        for f in &flats {
            if f.end <= start || start + len <= f.start {
                next.push(*f);
                continue;
            }
            if f.start < start {
                next.push(Flat { end: start, ..*f });
            }
            next.push(Flat {
                start: f.start.max(start),
                end: f.end.min(start + len),
                height: flat.height + size,
            });
            if start + len < f.end {
                next.push(Flat {
                    start: start + len,
                    ..*f
                });
            }
        }
        flats.clear();
        for f in next {
            match flats.last_mut() {
                Some(last) if last.end == f.start && last.height == f.height => last.end = f.end,
                _ => flats.push(f),
            }
        }
    }
    placed
        .into_iter()
        .filter(|_| rng.next() % 100 >= drop_percent)
        .map(|(first, last, height, size)| Piece {
            lower: cuts[first as usize] * 1024,
            upper: cuts[last as usize] * 1024,
            offset: (units - height - size) * unit,
            size: size * unit,
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
