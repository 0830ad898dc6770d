//! The host: CPU vendor/family/model the way NCCL reads them with CPUID, and
//! NCCL's host hash (`host_hash` of every `<cpu>`).

use super::sysfs::SysFs;

/// What NCCL writes on a `<cpu>` besides numaid and affinity.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CpuId {
    /// CPUID vendor string, e.g. "GenuineIntel", "AuthenticAMD".
    pub(crate) vendor: String,
    /// NCCL's family: base family + (extended family << 4).
    pub(crate) family: u32,
    /// NCCL's model: base model + (extended model << 4).
    pub(crate) model: u32,
}

/// Read the first processor's vendor, family and model from /proc/cpuinfo and
/// turn them into NCCL's numbers. Linux prints family = base + extended when
/// the base is 0xF; NCCL adds the extended family shifted by 4 instead (so
/// AMD Zen 2, Linux family 23, is NCCL family 0xF + (8 << 4) = 143). The
/// model is the same in both for every family NCCL looks at.
pub(crate) fn read_cpuid(sys: &SysFs) -> Option<CpuId> {
    let text = sys.read_text("/proc/cpuinfo")?;
    parse_cpuinfo(&text)
}

pub(crate) fn parse_cpuinfo(text: &str) -> Option<CpuId> {
    let mut vendor = None;
    let mut family = None;
    let mut model = None;
    for line in text.lines() {
        if line.trim().is_empty() && vendor.is_some() {
            break; // end of the first processor
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "vendor_id" => vendor = Some(value.to_string()),
            "cpu family" => family = value.parse::<u32>().ok(),
            "model" => model = value.parse::<u32>().ok(),
            _ => {}
        }
    }
    let linux_family = family?;
    let nccl_family = if linux_family >= 0xF {
        0xF + ((linux_family - 0xF) << 4)
    } else {
        linux_family
    };
    Some(CpuId {
        vendor: vendor?,
        family: nccl_family,
        model: model?,
    })
}

/// NCCL's architecture names (`arch` attribute).
pub(crate) fn nccl_arch(rust_arch: &str) -> &'static str {
    match rust_arch {
        "x86_64" => "x86_64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64",
        _ => "",
    }
}

/// NCCL's host identity string: `NCCL_HOSTID` if set, else the host name
/// followed by the kernel boot id.
pub(crate) fn host_identity(sys: &SysFs, nccl_hostid: Option<&str>) -> String {
    if let Some(id) = nccl_hostid {
        return id.to_string();
    }
    let hostname = sys
        .read_text("/proc/sys/kernel/hostname")
        .map(|h| h.trim_end_matches('\n').to_string())
        .unwrap_or_else(|| "unknown".to_string());
    // NCCL reads the boot id with fscanf("%ms"): the first word.
    let boot_id = sys
        .read_text("/proc/sys/kernel/random/boot_id")
        .and_then(|b| b.split_whitespace().next().map(str::to_string))
        .unwrap_or_default();
    format!("{hostname}{boot_id}")
}

/// NCCL's 64-bit string hash (`getHash` in bitops.h): a two-word accumulator
/// fed 8 bytes at a time, then a final mix. Re-written from its description.
pub(crate) fn nccl_hash(bytes: &[u8]) -> u64 {
    let mut acc0: u64 = 1;
    let mut acc1: u64 = 1;
    acc0 ^= bytes.len() as u64;
    for chunk in bytes.chunks(8) {
        acc0 = acc0.wrapping_add(acc1);
        acc1 ^= acc0;
        acc0 ^= acc0 >> 31;
        acc0 = acc0.wrapping_mul(0x9de6_2bbc_8cef_3ce3);
        acc1 ^= acc1 >> 32;
        acc1 = acc1.wrapping_mul(0x485c_d631_1b59_9e79);
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        acc0 = acc0.wrapping_add(u64::from_le_bytes(word));
    }
    let mut h = acc0;
    h ^= h >> 31;
    h = h.wrapping_mul(0xbac3_bd56_2846_de6b);
    h = h.wrapping_add(acc1);
    h ^= h >> 32;
    h.wrapping_mul(0x995a_187a_14e7_b445)
}

/// `host_hash` as NCCL prints it (`%#lx`).
pub(crate) fn host_hash_attr(identity: &str) -> String {
    let h = nccl_hash(identity.as_bytes());
    if h == 0 {
        "0".to_string()
    } else {
        format!("{h:#x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intel_emerald_rapids_as_in_the_capture() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n\
                    model name\t: Intel(R) Xeon(R) Platinum 8580\n\nprocessor\t: 1\nvendor_id\t: Other\n";
        let id = parse_cpuinfo(text).unwrap();
        // The capture's <cpu vendor="GenuineIntel" familyid="6" modelid="207">.
        assert_eq!(id.vendor, "GenuineIntel");
        assert_eq!(id.family, 6);
        assert_eq!(id.model, 207);
    }

    #[test]
    fn amd_family_as_nccl_computes_it() {
        // Zen 2: CPUID base family 0xF, extended family 0x8. Linux prints 0xF+0x8 = 23;
        // NCCL computes 0xF + (0x8 << 4) = 15 + 128 = 143. Model 0x31 = 49 in both.
        let text = "vendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\n";
        let id = parse_cpuinfo(text).unwrap();
        assert_eq!((id.family, id.model), (143, 49));
        assert!(parse_cpuinfo("processor: 0\n").is_none());
    }

    #[test]
    fn host_hash_equals_nccls_on_the_lent_h200_vm() {
        // bench/results/probe-h200x2-2026-11-29: host name "vm", boot id below, and
        // NCCL 2.28.9's own dump of that boot says host_hash="0x957fa88433086cac".
        let identity = "vm525e6352-2ee6-4593-be50-910f412e3843";
        assert_eq!(host_hash_attr(identity), "0x957fa88433086cac");
    }

    #[test]
    fn hash_is_deterministic_and_length_sensitive() {
        // Empty input: acc = {1^0, 1} with no rounds, then the final mix only.
        // h = 1; h ^= 0; h *= 0xbac3bd562846de6b; h += 1; h ^= h >> 32; h *= 0x995a187a14e7b445.
        let mut h: u64 = 0xbac3_bd56_2846_de6b_u64.wrapping_add(1);
        h ^= h >> 32;
        h = h.wrapping_mul(0x995a_187a_14e7_b445);
        assert_eq!(nccl_hash(b""), h);
        assert_ne!(nccl_hash(b"a"), nccl_hash(b"a\0"));
        assert!(host_hash_attr("host").starts_with("0x"));
        assert_eq!(nccl_arch("aarch64"), "arm64");
    }
}
