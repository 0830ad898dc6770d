//! Sizes as nccl-tests reads them: binary units (16M = 16 MiB), plain byte
//! counts, fractions (1.5M), and sweep ranges `8..4G` that double each step.

use crate::error::{Error, Result};

/// Largest size any command accepts (2^40 bytes = 1 TiB).
pub const MAX_SIZE: u64 = 1 << 40;

/// Parse one size: `16M`, `1G`, `256K`, `4096`, `1.5M`, `16MiB`.
pub fn parse_size(text: &str) -> Result<u64> {
    let trimmed = text.trim();
    let value = parse_size::Config::new()
        .with_binary()
        .parse_size(trimmed)
        .map_err(|e| Error::bad_input(format!("invalid size '{text}': {e}")))?;
    if value == 0 {
        return Err(Error::bad_input(format!(
            "invalid size '{text}': must be at least 1 byte"
        )));
    }
    if value > MAX_SIZE {
        return Err(Error::bad_input(format!(
            "invalid size '{text}': larger than the 1 TiB (2^40 bytes) limit"
        )));
    }
    Ok(value)
}

/// Parse a sweep `LO..HI` (both inclusive, step x2) or a single size.
pub fn parse_size_range(text: &str) -> Result<Vec<u64>> {
    let Some((lo, hi)) = text.split_once("..") else {
        return Ok(vec![parse_size(text)?]);
    };
    let lo = parse_size(lo)?;
    let hi = parse_size(hi)?;
    if lo > hi {
        return Err(Error::bad_input(format!(
            "invalid size range '{text}': the start is larger than the end"
        )));
    }
    let mut sizes = Vec::new();
    let mut s = lo;
    while s <= hi {
        sizes.push(s);
        match s.checked_mul(2) {
            Some(next) => s = next,
            None => break,
        }
    }
    Ok(sizes)
}

/// Human form of a byte count in binary units: `16 MiB`, `1.5 KiB`, `8 B`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if (value - value.round()).abs() < 1e-9 {
        format!("{} {}", value.round() as u64, UNITS[unit])
    } else {
        format!("{:.1} {}", value, UNITS[unit])
    }
}

/// clap value parser for `--size`.
pub fn clap_size(text: &str) -> std::result::Result<u64, String> {
    parse_size(text).map_err(|e| e.to_string())
}

/// clap value parser for `--sizes` / `--sweep`.
pub fn clap_size_range(text: &str) -> std::result::Result<Vec<u64>, String> {
    parse_size_range(text).map_err(|e| e.to_string())
}

/// A user-named input file as text; an unreadable file is bad input naming it.
pub fn read_input_file(path: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::bad_input(format!("{path}: cannot read: {e}")))
}

/// C's `strtol(text, &end, 0)`: leading blanks, optional sign, `0x` hex, leading-`0` octal, else decimal. The value
/// of the longest prefix that parses (None: no digits, or out of range of i64) and the text after it.
pub fn c_strtol(text: &str) -> (Option<i64>, &str) {
    let t = text.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    let rest = &digits[end..];
    if end == 0 {
        // A leading `0` followed by a non-octal digit is the number 0.
        return (if radix == 8 { Some(0) } else { None }, rest);
    }
    let value = i64::from_str_radix(&digits[..end], radix)
        .ok()
        .map(|v| if neg { -v } else { v });
    (value, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_units_as_nccl_tests() {
        assert_eq!(parse_size("16M").unwrap(), 16 * 1024 * 1024);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("256K").unwrap(), 256 * 1024);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1.5M").unwrap(), 1_572_864);
        assert_eq!(parse_size("16MiB").unwrap(), 16 * 1024 * 1024);
    }

    #[test]
    fn bad_sizes_are_input_errors() {
        for bad in ["16Q", "-1", "0", "", "2T"] {
            let err = parse_size(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}");
            assert!(err.to_string().contains(bad), "{err}");
        }
        assert!(parse_size("1T").is_ok());
    }

    #[test]
    fn ranges_double() {
        assert_eq!(parse_size_range("8..64").unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(parse_size_range("8..4G").unwrap().len(), 30);
        assert_eq!(parse_size_range("1M").unwrap(), vec![1 << 20]);
        assert!(parse_size_range("4G..8").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_size(16 << 20), "16 MiB");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(8), "8 B");
    }
}
