//! Tensor files for `hilt infer`: raw little-endian bytes or NumPy `.npy`.

use std::path::Path;

use hilt_runtime::schema::TensorType;

/// A tensor file's contents, checked against nothing yet.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorFile {
    /// The data bytes (little-endian).
    pub data: Vec<u8>,
    /// Element type from a `.npy` header (`None` for raw files).
    pub dtype: Option<TensorType>,
    /// Shape from a `.npy` header.
    pub shape: Option<Vec<usize>>,
}

/// Why a tensor file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TensorFileError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The `.npy` header is malformed or unsupported.
    #[error("{path}: {problem}")]
    Npy {
        /// File.
        path: String,
        /// What is wrong.
        problem: String,
    },
}

/// The NumPy `descr` of a tensor type (little-endian).
pub fn npy_descr(dtype: TensorType) -> Option<&'static str> {
    Some(match dtype {
        TensorType::INT8 => "|i1",
        TensorType::UINT8 => "|u1",
        TensorType::BOOL => "|b1",
        TensorType::INT16 => "<i2",
        TensorType::INT32 => "<i4",
        TensorType::INT64 => "<i8",
        TensorType::FLOAT16 => "<f2",
        TensorType::FLOAT32 => "<f4",
        TensorType::FLOAT64 => "<f8",
        _ => return None,
    })
}

fn descr_type(descr: &str) -> Option<TensorType> {
    let normal = descr.replace('=', "<");
    [
        TensorType::INT8,
        TensorType::UINT8,
        TensorType::BOOL,
        TensorType::INT16,
        TensorType::INT32,
        TensorType::INT64,
        TensorType::FLOAT16,
        TensorType::FLOAT32,
        TensorType::FLOAT64,
    ]
    .into_iter()
    .find(|&t| {
        let d = npy_descr(t).unwrap_or_default();
        d == normal || (d.starts_with('|') && normal == format!("<{}", &d[1..]))
    })
}

/// Reads `path`: `.npy` files are parsed, anything else is raw bytes.
pub fn read(path: &Path) -> Result<TensorFile, TensorFileError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| TensorFileError::Io {
        path: name.clone(),
        source,
    })?;
    if path.extension().is_some_and(|e| e == "npy") {
        parse_npy(&bytes).map_err(|problem| TensorFileError::Npy {
            path: name,
            problem,
        })
    } else {
        Ok(TensorFile {
            data: bytes,
            dtype: None,
            shape: None,
        })
    }
}

/// Parses a version 1/2/3 `.npy` file (C order, little-endian).
pub fn parse_npy(bytes: &[u8]) -> Result<TensorFile, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (bad magic)".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!(".npy version {v} is not supported")),
    };
    let header = bytes
        .get(start..start + header_len)
        .ok_or("truncated .npy header")?;
    let header = std::str::from_utf8(header).map_err(|_| "the .npy header is not text")?;
    let field = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}'"))? + key.len() + 2;
        Some(
            header[at..]
                .trim_start()
                .trim_start_matches(':')
                .trim_start(),
        )
    };
    let descr = field("descr")
        .and_then(|v| v.strip_prefix('\'')?.split('\'').next())
        .ok_or("no descr in .npy header")?;
    let dtype = descr_type(descr).ok_or_else(|| format!("dtype {descr} is not supported"))?;
    if field("fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err("Fortran-order arrays are not supported".into());
    }
    let shape_text = field("shape")
        .and_then(|v| v.strip_prefix('(')?.split(')').next())
        .ok_or("no shape in .npy header")?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad shape entry {s:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let data = bytes[start + header_len..].to_vec();
    Ok(TensorFile {
        data,
        dtype: Some(dtype),
        shape: Some(shape),
    })
}

/// Writes `data` as a version 1 `.npy` file.
pub fn write_npy(dtype: TensorType, shape: &[usize], data: &[u8]) -> Option<Vec<u8>> {
    let descr = npy_descr(dtype)?;
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape_text = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    // Pad so the data starts on a 64-byte boundary, ending with a newline.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip() {
        let data: Vec<u8> = [1.5f32, -2.0, 3.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let file = write_npy(TensorType::FLOAT32, &[1, 3], &data).unwrap();
        let parsed = parse_npy(&file).unwrap();
        assert_eq!(parsed.dtype, Some(TensorType::FLOAT32));
        assert_eq!(parsed.shape, Some(vec![1, 3]));
        assert_eq!(parsed.data, data);
    }

    #[test]
    fn npy_errors_are_described() {
        assert!(
            parse_npy(b"garbage!!!!!")
                .unwrap_err()
                .contains("bad magic")
        );
        let mut file = write_npy(TensorType::INT8, &[2], &[1, 2]).unwrap();
        file[6] = 9;
        assert!(parse_npy(&file).unwrap_err().contains("version 9"));
        let text = b"\x93NUMPY\x01\x00\x20\x00{'descr': '<c8', 'shape': (2,)}   \n";
        assert!(parse_npy(text).unwrap_err().contains("<c8"));
    }
}
