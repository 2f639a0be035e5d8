//! Drive profiles: the affine cost model T(B) = S + B/W per I/O (Kuszmaul,
//! seed 001) plus P channels that service I/Os at once (PDAM's P), named
//! presets with their sources, and the `S,W,P` command-line syntax.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Cost of an fsync when the profile does not say: one flush command that
/// waits for the queue to drain, then 100 us. A small constant so that
/// fsync-heavy runs stay dominated by S and W; set `fsync_us` for drives
/// whose flushes are expensive (no power-loss protection: milliseconds).
pub const DEFAULT_FSYNC_US: f64 = 100.0;

/// Largest channel count accepted (real NVMe drives expose at most a few
/// hundred parallel units; more is a typo).
pub const MAX_CHANNELS: u32 = 4096;

/// An emulated drive: every I/O of B bytes holds one of `channels` channels
/// for `setup_us` + B / `bandwidth_bytes_per_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriveProfile {
    /// Preset name, when the profile came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Setup time S per I/O, microseconds.
    pub setup_us: f64,
    /// Transfer rate W of one channel, bytes per second.
    pub bandwidth_bytes_per_s: f64,
    /// I/Os serviced at once (P); more wait for a free channel.
    pub channels: u32,
    /// Service time of an fsync once earlier I/Os have drained, microseconds.
    #[serde(default = "default_fsync_us")]
    pub fsync_us: f64,
}

fn default_fsync_us() -> f64 {
    DEFAULT_FSYNC_US
}

/// A named profile and where its numbers come from.
pub struct Preset {
    pub name: &'static str,
    pub source: &'static str,
    pub setup_us: f64,
    pub bandwidth_bytes_per_s: f64,
    pub channels: u32,
}

/// The named profiles. Sources:
/// - `x25e`: seed 001 ("What is a performance model for SSDs?"), the Intel
///   X25-E as measured: T = 500 us + B / (120 MB/s). P = 3: "up to 11,000
///   reads/s with multithreading" against "actual read performance is 4K
///   IO/s" unthreaded, 11000 / 4000 = 2.75, rounded up.
/// - `x25e-datasheet`: the same slide's datasheet model, 16 us + B / 250 MB/s
///   (35 KIO/s at 4 KB means one I/O at a time: P = 1). Faster than most
///   virtual disks, so emulating it mostly measures the real device.
/// - `rethinkdb-2009`: seed 000's SSD table (IOPS at 1..64 KB). T = 1/IOPS
///   fitted by least squares weighted by 1/T^2 (as `pagewise model` fits):
///   S = 224 us, W = 107 MB/s (unweighted: 247 us, 121 MB/s). P = 1: the
///   benchmark ran one I/O at a time.
/// - `hdd`: seed 001's rotating disk, a 5-disk RAID at 600 random I/O/s and
///   400 MB/s: one disk does 120 I/O/s (S = 1/120 s = 8.3 ms) and 80 MB/s;
///   S x W = 667 KB, inside the slide's 0.5-1 MB half-power point. P = 1.
/// - `nvme`: an illustrative modern NVMe SSD, not a measured one: 50 us
///   setup (QD1 4 KiB read latency of current TLC drives is 50-90 us),
///   1.5 GB/s per channel, 8 channels. Faster than this project's CI disk.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "x25e",
        source: "seed 001, Intel X25-E as measured: 500 us + B/(120 MB/s), 11,000 vs 4,000 reads/s threaded vs not",
        setup_us: 500.0,
        bandwidth_bytes_per_s: 120e6,
        channels: 3,
    },
    Preset {
        name: "x25e-datasheet",
        source: "seed 001, Intel X25-E datasheet model: 16 us + B/(250 MB/s)",
        setup_us: 16.0,
        bandwidth_bytes_per_s: 250e6,
        channels: 1,
    },
    Preset {
        name: "rethinkdb-2009",
        source: "seed 000, RethinkDB's 2009 SSD table (1..64 KB), 1/IOPS fitted: 224 us + B/(107 MB/s)",
        setup_us: 224.0,
        bandwidth_bytes_per_s: 107e6,
        channels: 1,
    },
    Preset {
        name: "hdd",
        source: "seed 001, one disk of the 5-disk RAID: 120 random I/O/s, 80 MB/s",
        setup_us: 8333.0,
        bandwidth_bytes_per_s: 80e6,
        channels: 1,
    },
    Preset {
        name: "nvme",
        source: "illustrative NVMe SSD (typical datasheet class, not a measured drive)",
        setup_us: 50.0,
        bandwidth_bytes_per_s: 1.5e9,
        channels: 8,
    },
];

/// Why a profile string or value was refused; names the bad part.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("drive profile '{input}': {what}")]
pub struct ProfileError {
    pub input: String,
    pub what: String,
}

impl DriveProfile {
    /// A profile with the default fsync cost.
    pub fn new(setup_us: f64, bandwidth_bytes_per_s: f64, channels: u32) -> Self {
        Self {
            name: None,
            setup_us,
            bandwidth_bytes_per_s,
            channels,
            fsync_us: DEFAULT_FSYNC_US,
        }
    }

    /// The preset called `name` (case-insensitive), if any.
    pub fn preset(name: &str) -> Option<Self> {
        let p = PRESETS
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name.trim()))?;
        Some(Self {
            name: Some(p.name.to_string()),
            ..Self::new(p.setup_us, p.bandwidth_bytes_per_s, p.channels)
        })
    }

    /// Parses a preset name or `S,W,P[,FSYNC]`, e.g. `500us,120MB/s,1` or
    /// `2ms,50MB/s,4,1ms`. Times take ns, us (or µs), ms or s; rates B/s,
    /// KB/s, MB/s, GB/s (x1000) or KiB/s, MiB/s, GiB/s (x1024).
    pub fn parse(input: &str) -> Result<Self, ProfileError> {
        let err = |what: String| ProfileError {
            input: input.to_string(),
            what,
        };
        if let Some(p) = Self::preset(input) {
            return Ok(p);
        }
        let parts: Vec<&str> = input.split(',').map(str::trim).collect();
        if !(3..=4).contains(&parts.len()) {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            return Err(err(format!(
                "not a preset ({}) nor S,W,P such as 500us,120MB/s,1 (optionally ,FSYNC such as ,1ms)",
                names.join(", ")
            )));
        }
        let setup_us =
            parse_micros(parts[0]).map_err(|e| err(format!("setup time S '{}': {e}", parts[0])))?;
        let bandwidth =
            parse_rate(parts[1]).map_err(|e| err(format!("bandwidth W '{}': {e}", parts[1])))?;
        let channels: u32 = parts[2].parse().map_err(|_| {
            err(format!(
                "channels P '{}': write a whole number of I/Os serviced at once, e.g. 1 or 8",
                parts[2]
            ))
        })?;
        let mut p = Self::new(setup_us, bandwidth, channels);
        if let Some(f) = parts.get(3) {
            p.fsync_us = parse_micros(f).map_err(|e| err(format!("fsync time '{f}': {e}")))?;
        }
        p.validate().map_err(|e| err(e.what))?;
        Ok(p)
    }

    /// Checks that the numbers describe a drive.
    pub fn validate(&self) -> Result<(), ProfileError> {
        let err = |what: String| ProfileError {
            input: self.to_string(),
            what,
        };
        if !(self.setup_us.is_finite() && self.setup_us >= 0.0) {
            return Err(err("setup time S must be 0 or more".into()));
        }
        if !(self.bandwidth_bytes_per_s.is_finite() && self.bandwidth_bytes_per_s > 0.0) {
            return Err(err("bandwidth W must be above 0".into()));
        }
        if !(1..=MAX_CHANNELS).contains(&self.channels) {
            return Err(err(format!("channels P must be 1..={MAX_CHANNELS}")));
        }
        if !(self.fsync_us.is_finite() && self.fsync_us >= 0.0) {
            return Err(err("fsync time must be 0 or more".into()));
        }
        Ok(())
    }

    /// T(B) = S + B/W: how long one I/O of `bytes` holds a channel.
    pub fn service_time(&self, bytes: u64) -> Duration {
        let secs = self.setup_us * 1e-6 + bytes as f64 / self.bandwidth_bytes_per_s;
        Duration::from_secs_f64(secs.max(0.0))
    }

    /// S x W: the block size at which setup and transfer take equal time.
    pub fn half_bandwidth_bytes(&self) -> f64 {
        self.setup_us * 1e-6 * self.bandwidth_bytes_per_s
    }

    /// The one-line notice shown on outputs produced through the emulation.
    pub fn banner(&self) -> String {
        format!("Emulated drive: {self} (not the real device)")
    }
}

/// `S=500 us, W=120 MB/s, P=1` (plus the preset name and a non-default fsync).
impl fmt::Display for DriveProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(n) = &self.name {
            write!(f, "{n}, ")?;
        }
        write!(
            f,
            "S={} us, W={} MB/s, P={}",
            trim_num(self.setup_us),
            trim_num(self.bandwidth_bytes_per_s / 1e6),
            self.channels
        )?;
        if self.fsync_us != DEFAULT_FSYNC_US {
            write!(f, ", fsync={} us", trim_num(self.fsync_us))?;
        }
        Ok(())
    }
}

/// Up to 3 decimals, trailing zeros dropped: 500, 0.5, 107.
fn trim_num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Splits "12.5ms" into (12.5, "ms").
fn split_number(s: &str) -> Result<(f64, &str), String> {
    let at = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(at);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{num}' is not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("'{num}' must be a finite number, 0 or more"));
    }
    Ok((v, unit.trim()))
}

/// Microseconds in "500us", "0.5ms", "2 ms", "1s", "800ns".
pub fn parse_micros(s: &str) -> Result<f64, String> {
    let (v, unit) = split_number(s.trim())?;
    let mult = match unit {
        "ns" => 1e-3,
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "" => return Err("give a unit: ns, us, ms or s (e.g. 500us)".into()),
        u => return Err(format!("unknown time unit '{u}': use ns, us, ms or s")),
    };
    Ok(v * mult)
}

/// Bytes per second in "120MB/s", "1.5GB/s", "500KiB/s".
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let (size, per) = s
        .trim()
        .rsplit_once('/')
        .ok_or("write a rate per second, e.g. 120MB/s")?;
    if per.trim() != "s" {
        return Err(format!("'/{per}': rates are per second, write /s"));
    }
    let (v, unit) = split_number(size.trim())?;
    let mult = match unit {
        "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        u => {
            return Err(format!(
                "unknown size unit '{u}': use B, KB, MB, GB (x1000) or KiB, MiB, GiB (x1024)"
            ))
        }
    };
    Ok(v * mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_s_w_p_and_presets() {
        let p = DriveProfile::parse("500us,120MB/s,1").unwrap();
        assert_eq!(
            (p.setup_us, p.bandwidth_bytes_per_s, p.channels),
            (500.0, 120e6, 1)
        );
        assert_eq!(p.fsync_us, DEFAULT_FSYNC_US);
        let q = DriveProfile::parse(" 2ms, 50MiB/s, 4, 1ms ").unwrap();
        assert_eq!(q.setup_us, 2000.0);
        assert_eq!(q.bandwidth_bytes_per_s, 50.0 * 1048576.0);
        assert_eq!((q.channels, q.fsync_us), (4, 1000.0));
        let x = DriveProfile::parse("X25E").unwrap();
        assert_eq!((x.setup_us, x.channels), (500.0, 3));
        assert_eq!(x.to_string(), "x25e, S=500 us, W=120 MB/s, P=3");
        for preset in PRESETS {
            DriveProfile::preset(preset.name)
                .unwrap()
                .validate()
                .unwrap();
        }
    }

    #[test]
    fn errors_name_the_bad_part() {
        let e = |s: &str| DriveProfile::parse(s).unwrap_err().to_string();
        assert!(
            e("500,120MB/s,1").contains("setup time S '500'"),
            "{}",
            e("500,120MB/s,1")
        );
        assert!(e("500us,120MB,1").contains("bandwidth W '120MB'"));
        assert!(e("500us,120Mb/s,1").contains("unknown size unit 'Mb'"));
        assert!(e("500us,120MB/s,two").contains("channels P 'two'"));
        assert!(e("500us,120MB/s,0").contains("channels P must be"));
        assert!(e("500us,0MB/s,1").contains("bandwidth W must be above 0"));
        assert!(e("500us,1MB/s,1,fast").contains("fsync time 'fast'"));
        assert!(e("floppy").contains("not a preset (x25e"));
    }

    #[test]
    fn service_time_is_s_plus_b_over_w() {
        let p = DriveProfile::new(500.0, 120e6, 1);
        // 500 us + 1 MB / 120 MB/s = 500 us + 8333.33 us.
        let t = p.service_time(1_000_000);
        assert!((t.as_secs_f64() - 8.833_333e-3).abs() < 1e-8, "{t:?}");
        assert!((p.half_bandwidth_bytes() - 60_000.0).abs() < 1e-6);
        assert_eq!(
            p.banner(),
            "Emulated drive: S=500 us, W=120 MB/s, P=1 (not the real device)"
        );
    }
}
