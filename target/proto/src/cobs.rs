//! Consistent Overhead Byte Stuffing: removes every zero byte from a frame
//! at a cost of one byte per 254, so 0x00 can delimit frames.

/// Bytes an encoding of `len` bytes can take at most (without the delimiter).
pub const fn max_encoded_len(len: usize) -> usize {
    len + len / 254 + 1
}

/// Encodes `input` into `out`; returns the encoded length, or `None` if
/// `out` is too short.
pub fn encode(input: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut code_at = 0;
    let mut write = 1;
    let mut code: u8 = 1;
    for &b in input {
        if b == 0 {
            *out.get_mut(code_at)? = code;
            code_at = write;
            write += 1;
            code = 1;
        } else {
            *out.get_mut(write)? = b;
            write += 1;
            code += 1;
            if code == 0xFF {
                *out.get_mut(code_at)? = code;
                code_at = write;
                write += 1;
                code = 1;
            }
        }
    }
    *out.get_mut(code_at)? = code;
    Some(write)
}

/// Decodes `input` (without the delimiter) into `out`; returns the decoded
/// length, or `None` if the input is not valid COBS or `out` is too short.
pub fn decode(input: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut read = 0;
    let mut write = 0;
    while read < input.len() {
        let code = input[read];
        if code == 0 {
            return None;
        }
        read += 1;
        for _ in 1..code {
            let b = *input.get(read)?;
            if b == 0 {
                return None;
            }
            *out.get_mut(write)? = b;
            write += 1;
            read += 1;
        }
        if code != 0xFF && read < input.len() {
            *out.get_mut(write)? = 0;
            write += 1;
        }
    }
    Some(write)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(data: &[u8]) {
        let mut enc = vec![0u8; max_encoded_len(data.len())];
        let n = encode(data, &mut enc).unwrap();
        assert!(!enc[..n].contains(&0));
        let mut dec = vec![0u8; data.len()];
        let m = decode(&enc[..n], &mut dec).unwrap();
        assert_eq!(&dec[..m], data);
    }

    #[test]
    fn examples() {
        round_trip(&[]);
        round_trip(&[0]);
        round_trip(&[0, 0]);
        round_trip(&[1, 2, 0, 3]);
        round_trip(&(1..=254).collect::<Vec<u8>>());
        round_trip(&(0..=255).cycle().take(1000).collect::<Vec<u8>>());
        let mut enc = [0u8; 8];
        assert_eq!(encode(&[0x11, 0x22, 0x00, 0x33], &mut enc), Some(5));
        assert_eq!(&enc[..5], &[3, 0x11, 0x22, 2, 0x33]);
    }

    #[test]
    fn invalid_input_is_refused() {
        let mut out = [0u8; 16];
        assert_eq!(decode(&[0], &mut out), None);
        assert_eq!(decode(&[5, 1, 2], &mut out), None);
        assert_eq!(decode(&[3, 1, 0], &mut out), None);
    }
}
