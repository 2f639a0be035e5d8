//! Human units: sizes (`256GB`, `256GiB`, `4k`), rates (`10MB/s`, `100GB/day`)
//! and percentages (`30%`).
//!
//! Conventions: `KB`/`MB`/`GB`/`TB` are decimal (drive vendors' units),
//! `KiB`/`MiB`/`GiB`/`TiB` binary, and the bare single letters `k`/`m`/`g`/`t`
//! binary as in fio and dd (`4k` is 4096 bytes).

use crate::ModelError;

const SIZE_HINT: &str =
    "write a number with an optional unit: B, KB, MB, GB, TB (x1000), KiB, MiB, GiB, TiB or k, m, g, t (x1024)";
const RATE_HINT: &str = "write a size per time, e.g. 10MB/s, 500KiB/s, 100GB/day or 2TB/h";
const PCT_HINT: &str = "write a percentage like 30% or a fraction like 0.3";

/// Bytes in a size written in human units. Fractions are allowed (`1.5GB`).
pub fn parse_size(input: &str) -> Result<f64, ModelError> {
    let err = || ModelError::Unit {
        input: input.into(),
        what: "a size",
        hint: SIZE_HINT,
    };
    let s = input.trim();
    let split = s
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')
        })
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| err())?;
    let mult = match unit.trim() {
        "" | "B" | "b" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" | "k" | "K" | "KIB" | "kib" => 1024.0,
        "MiB" | "m" | "M" | "MIB" | "mib" => 1024.0 * 1024.0,
        "GiB" | "g" | "G" | "GIB" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "TiB" | "t" | "T" | "TIB" | "tib" => 1024.0f64.powi(4),
        _ => return Err(err()),
    };
    let bytes = value * mult;
    if !bytes.is_finite() {
        return Err(err());
    }
    Ok(bytes)
}

/// A size that must be a positive whole number of bytes.
pub fn parse_bytes(input: &str) -> Result<u64, ModelError> {
    let v = parse_size(input)?;
    if v <= 0.0 {
        return Err(ModelError::NotPositive {
            what: "size".into(),
            value: input.into(),
        });
    }
    if v.fract() != 0.0 || v > u64::MAX as f64 {
        return Err(ModelError::Unit {
            input: input.into(),
            what: "a whole number of bytes",
            hint: SIZE_HINT,
        });
    }
    Ok(v as u64)
}

/// Bytes per second in a rate written in human units.
pub fn parse_rate(input: &str) -> Result<f64, ModelError> {
    let err = || ModelError::Unit {
        input: input.into(),
        what: "a rate",
        hint: RATE_HINT,
    };
    let (size, per) = input.trim().rsplit_once('/').ok_or_else(err)?;
    let seconds = match per.trim() {
        "s" | "sec" | "second" => 1.0,
        "min" | "minute" => 60.0,
        "h" | "hour" => 3600.0,
        "d" | "day" => 86400.0,
        _ => return Err(err()),
    };
    let bytes = parse_size(size).map_err(|_| err())?;
    Ok(bytes / seconds)
}

/// A fraction from `30%` or `0.3`.
pub fn parse_percent(input: &str) -> Result<f64, ModelError> {
    let err = || ModelError::Unit {
        input: input.into(),
        what: "a percentage",
        hint: PCT_HINT,
    };
    let s = input.trim();
    let v = if let Some(p) = s.strip_suffix('%') {
        p.trim().parse::<f64>().map_err(|_| err())? / 100.0
    } else {
        let v: f64 = s.parse().map_err(|_| err())?;
        if v > 1.0 {
            return Err(err());
        }
        v
    };
    if !v.is_finite() {
        return Err(err());
    }
    Ok(v)
}

/// `4 KiB`, `1 MiB`, `512 B`, `1.5 GiB`: binary units for page and block sizes.
pub fn fmt_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut i = 0;
    while v.abs() >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if v.fract() == 0.0 || v >= 100.0 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// `10.0 MB/s`: decimal units for throughput.
pub fn fmt_rate(bytes_per_s: f64) -> String {
    const UNITS: [&str; 5] = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"];
    let mut v = bytes_per_s;
    let mut i = 0;
    while v.abs() >= 1000.0 && i + 1 < UNITS.len() {
        v /= 1000.0;
        i += 1;
    }
    format!("{v:.1} {}", UNITS[i])
}

/// Thousands separators for counts (`12,345`).
pub fn fmt_count(v: f64) -> String {
    let n = v.round() as i128;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256GB").unwrap(), 256e9);
        assert_eq!(
            parse_size("256GiB").unwrap(),
            256.0 * 1024.0 * 1024.0 * 1024.0
        );
        assert_eq!(parse_size("4k").unwrap(), 4096.0);
        assert_eq!(parse_size("4 KiB").unwrap(), 4096.0);
        assert_eq!(parse_size("512").unwrap(), 512.0);
        assert_eq!(parse_size("1.5MB").unwrap(), 1.5e6);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("GB").is_err());
        assert_eq!(parse_bytes("1m").unwrap(), 1 << 20);
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("-4k").is_err());
        assert!(parse_bytes("0.5").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10MB/s").unwrap(), 10e6);
        assert_eq!(parse_rate("86.4GB/day").unwrap(), 1e6);
        assert_eq!(parse_rate("1KiB/s").unwrap(), 1024.0);
        assert!(parse_rate("10MB").is_err());
        assert!(parse_rate("10MB/fortnight").is_err());
    }

    #[test]
    fn percents() {
        assert!((parse_percent("30%").unwrap() - 0.3).abs() < 1e-12);
        assert!((parse_percent("0.3").unwrap() - 0.3).abs() < 1e-12);
        assert!(parse_percent("30").is_err());
        assert!(parse_percent("lots").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_bytes(4096.0), "4 KiB");
        assert_eq!(fmt_bytes(512.0), "512 B");
        assert_eq!(fmt_bytes(1536.0), "1.5 KiB");
        assert_eq!(fmt_rate(10e6), "10.0 MB/s");
        assert_eq!(fmt_count(1234567.0), "1,234,567");
        assert_eq!(fmt_count(12.0), "12");
    }
}
