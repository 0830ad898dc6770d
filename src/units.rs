//! Sizes as nccl-tests reads them: binary units (16M = 16 MiB, also spelled
//! 16Mi or 16MiB), plain byte counts, fractions (1.5M), and sweep ranges
//! `8..4G` that double each step. Decimal spellings (16MB, 16mb) are refused:
//! they would be read as MiB without a word.

use crate::error::{Error, Result};

/// Largest size any command accepts (2^40 bytes = 1 TiB).
pub const MAX_SIZE: u64 = 1 << 40;

/// Parse one size: `16M`, `1G`, `256K`, `4096`, `1.5M`, `16Mi`, `16MiB`.
pub fn parse_size(text: &str) -> Result<u64> {
    let trimmed = text.trim();
    check_size_digits(text, trimmed)?;
    check_binary_unit(text, trimmed)?;
    if trimmed.starts_with('-') {
        return Err(Error::bad_input(format!(
            "invalid size '{text}': a size is a positive number of bytes"
        )));
    }
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

/// Parse a sweep `LO..HI` (both inclusive, step x2); one size is `--size`.
pub fn parse_sweep(text: &str) -> Result<Vec<u64>> {
    if !text.contains("..") {
        return Err(Error::bad_input(format!(
            "invalid range '{text}': give LO..HI (e.g. 8..4G); for one size use --size"
        )));
    }
    parse_size_range(text)
}

/// Refuse decimal unit spellings (`16MB`, `16kb`): every size here is binary, as in nccl-tests, and reading
/// `MB` as MiB without a word would hide a 5 % difference.
fn check_binary_unit(text: &str, trimmed: &str) -> Result<()> {
    let unit: String = trimmed
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let lower = unit.to_ascii_lowercase();
    if lower.len() == 2 && lower.ends_with('b') && "kmgtpe".contains(&lower[..1]) {
        let prefix = unit[..1].to_ascii_uppercase();
        let number = &trimmed[..trimmed.len() - unit.len()];
        return Err(Error::bad_input(format!(
            "invalid size '{text}': units are binary; write {number}{prefix} or {number}{prefix}iB ({prefix}iB = 2^{} bytes), or a number of bytes",
            10 * (1 + "KMGTPE".find(&prefix).unwrap_or(0))
        )));
    }
    Ok(())
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

/// Longest size text accepted (digit grouping and a unit included).
const MAX_SIZE_TEXT: usize = 64;
/// Most significant digits in a size: a u64 holds 19 of any value.
const MAX_SIZE_DIGITS: usize = 19;
/// Significant digits at which a plain number of bytes is already above `MAX_SIZE` (10^13 > 2^40).
const DIGITS_ABOVE_MAX_SIZE: usize = 14;

/// Refuse what would overflow inside the parse-size crate (its mantissa wraps past 19 significant digits, which
/// debug builds catch as a panic and release builds turn into a wrong value), naming the limit.
fn check_size_digits(text: &str, trimmed: &str) -> Result<()> {
    if trimmed.len() > MAX_SIZE_TEXT {
        return Err(Error::bad_input(format!(
            "invalid size '{text}': longer than {MAX_SIZE_TEXT} characters"
        )));
    }
    // The mantissa: everything before an exponent `e` that follows a digit (a trailing `e` is the exa unit).
    let bytes = trimmed.as_bytes();
    let exponent_at = (1..bytes.len()).find(|&i| {
        matches!(bytes[i], b'e' | b'E')
            && bytes[i - 1].is_ascii_digit()
            && bytes[i + 1..].iter().any(u8::is_ascii_digit)
    });
    let mantissa = &bytes[..exponent_at.unwrap_or(bytes.len())];
    let mut significant = 0;
    let mut integer_digits = 0;
    let mut in_fraction = false;
    for &b in mantissa {
        match b {
            b'.' => in_fraction = true,
            b'0' if significant == 0 => {}
            b'0'..=b'9' => {
                significant += 1;
                if !in_fraction {
                    integer_digits += 1;
                }
            }
            _ => {}
        }
    }
    if exponent_at.is_none() && integer_digits >= DIGITS_ABOVE_MAX_SIZE {
        return Err(Error::bad_input(format!(
            "invalid size '{text}': larger than the 1 TiB (2^40 bytes) limit"
        )));
    }
    if significant > MAX_SIZE_DIGITS {
        return Err(Error::bad_input(format!(
            "invalid size '{text}': more than {MAX_SIZE_DIGITS} significant digits"
        )));
    }
    Ok(())
}

// The input readers moved to `fsio`; callers not yet switched use them from here.
pub(crate) use crate::fsio::{read_input_bytes, read_input_file};

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

/// "1 rank", "2 ranks": a count with its noun, plural by English's regular rule (the nouns planner counts are all
/// regular).
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
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
        assert_eq!(parse_size("16Mi").unwrap(), 16 * 1024 * 1024);
        assert_eq!(parse_size("16m").unwrap(), 16 * 1024 * 1024);
    }

    #[test]
    fn decimal_units_are_refused_with_the_binary_spelling() {
        for (bad, hint) in [
            ("16MB", "16M or 16MiB"),
            ("16mb", "16M or 16MiB"),
            ("4kB", "4K or 4KiB"),
        ] {
            let err = parse_size(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}");
            assert!(err.to_string().contains(hint), "{err}");
            assert!(err.to_string().contains("binary"), "{err}");
        }
        assert!(parse_sweep("1M")
            .unwrap_err()
            .to_string()
            .contains("--size"));
        assert_eq!(parse_sweep("8..16").unwrap(), vec![8, 16]);
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
    fn sizes_that_overflowed_parse_size_name_the_limit() {
        // parse-size's mantissa wrapped to 0 here ("must be at least 1 byte"), a panic in debug builds.
        let err = parse_size("18446744073709551615.5M").unwrap_err();
        assert!(err.to_string().contains("1 TiB"), "{err}");
        let err = parse_size("184467440737095516155").unwrap_err();
        assert!(err.to_string().contains("1 TiB"), "{err}");
        let err = parse_size("0.18446744073709551615M").unwrap_err();
        assert!(err.to_string().contains("19 significant digits"), "{err}");
        let err = parse_size(&"1".repeat(100)).unwrap_err();
        assert!(err.to_string().contains("64 characters"), "{err}");
        // Leading zeros and exponents are not significant digits; the exa unit `E` is not an exponent.
        assert_eq!(parse_size("0000000000000000000001M").unwrap(), 1 << 20);
        assert_eq!(parse_size("1.5e3").unwrap(), 1500);
        assert_eq!(parse_size("1234567890123456789e-9").unwrap(), 1_234_567_890);
        assert!(parse_size("12345678901234567890e-9").is_err());
        assert!(parse_size("1E").unwrap_err().to_string().contains("1 TiB"));
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
        assert_eq!(count(1, "rank"), "1 rank");
        assert_eq!(count(0, "channel"), "0 channels");
        assert_eq!(count(16, "constant"), "16 constants");
    }
}
