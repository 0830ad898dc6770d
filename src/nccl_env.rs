//! NCCL's environment variables: the one place planner reads them (`NcclEnv::from_process`), parsed the way NCCL
//! parses each one, then handed to the stages as data (paths, search, connect, model). No stage reads the process
//! environment itself. An audit builds the same struct from a log's "set by environment" lines (`from_pairs`).
//!
//! Line numbers below are NCCL v2.30.7-1 unless a v2.28.9-1 line is named.

use crate::error::{Error, Result};
use crate::limits::MAX_CHANNELS;
use crate::topo::PathType;
use serde::Serialize;
use std::collections::BTreeMap;

/// Every variable `NcclEnv` reads, by name, in the order they are shown.
pub const VARIABLES: [&str; 33] = [
    // Cost model (tuning.cc, enqueue.cc).
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_NTHREADS",
    "NCCL_LL128_NTHREADS",
    "NCCL_THREAD_THRESHOLDS",
    "NCCL_NET_OVERHEAD",
    "NCCL_PAT_ENABLE",
    "NCCL_LL128_C2C",
    "NCCL_NVLS_ENABLE",
    "NCCL_COLLNET_ENABLE",
    // Paths (paths.cc) and the network plugin.
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_C2C",
    "NCCL_NVB_DISABLE",
    "NCCL_PXN_DISABLE",
    "NCCL_PXN_C2C",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_P2P_PXN_LEVEL",
    // Search and connection (search.cc, connect.cc, init.cc, nvls.cc).
    "NCCL_CROSS_NIC",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NRINGS",
    "NCCL_MAX_NRINGS",
    "NCCL_MIN_CTAS",
    "NCCL_MAX_CTAS",
    "NCCL_NVLS_NCHANNELS",
    // Multi-node NVLink (init.cc:914 2.28.9, :1072 2.30.7).
    "NCCL_MNNVL_ENABLE",
    // Read by NCCL, not by the model (chunk sizes only).
    "NCCL_BUFFSIZE",
    "NCCL_LL_BUFFSIZE",
    "NCCL_LL128_BUFFSIZE",
    "NCCL_GRAPH_FILE",
];

/// Variables NCCL reads that the model has nothing to apply them to, and why.
const NOT_MODELLED: [(&str, &str); 5] = [
    // search.cc ncclTopoGetNetDev: the level is read only when no graph names the NIC, i.e. for send/recv; every
    // collective takes the NIC its graph names.
    (
        "NCCL_P2P_PXN_LEVEL",
        "PXN for send/recv only (search.cc ncclTopoGetNetDev without a graph); collectives use their graph's NIC",
    ),
    // init.cc:822-829 computeBuffSizes -> enqueue.cc:2222 stepSize = buffSizes[proto] / NCCL_STEPS: chunking only,
    // never the algorithm/protocol choice or NCCL's predicted time (tuning.cc does not read buffSizes).
    (
        "NCCL_BUFFSIZE",
        "only NCCL's chunk size, which the model does not price",
    ),
    (
        "NCCL_LL_BUFFSIZE",
        "only NCCL's chunk size, which the model does not price",
    ),
    (
        "NCCL_LL128_BUFFSIZE",
        "only NCCL's chunk size, which the model does not price",
    ),
    (
        "NCCL_GRAPH_FILE",
        "planner takes graph files with --graph FILE",
    ),
];

/// NCCL's knobs as NCCL reads them. `None` = unset (NCCL's default).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NcclEnv {
    /// `NCCL_ALGO`.
    pub algo: Option<String>,
    /// `NCCL_PROTO`.
    pub proto: Option<String>,
    /// `NCCL_IB_HCA`: which NICs NCCL's IB plugin keeps (`probe::net::IfList`).
    pub ib_hca: Option<String>,
    /// `NCCL_NTHREADS`.
    pub nthreads: Option<i64>,
    /// `NCCL_LL128_NTHREADS`.
    pub ll128_nthreads: Option<i64>,
    /// `NCCL_THREAD_THRESHOLDS` ("Tree LL LL128 Simple Ring LL LL128 Simple").
    pub thread_thresholds: Option<String>,
    /// `NCCL_NET_OVERHEAD` in ns.
    pub net_overhead_ns: Option<i64>,
    /// `NCCL_PAT_ENABLE` (0, 1, 2 = auto).
    pub pat_enable: Option<i64>,
    /// `NCCL_LL128_C2C` (default 1).
    pub ll128_c2c: Option<i64>,
    /// `NCCL_NVLS_ENABLE` (0, 1, 2 = use the multicast attribute).
    pub nvls_enable: Option<i64>,
    /// `NCCL_COLLNET_ENABLE` (default 0).
    pub collnet_enable: Option<i64>,
    /// `NCCL_P2P_DISABLE=1` (LOC) or `NCCL_P2P_LEVEL`, as `ncclGetLevel` resolves them.
    pub p2p_level: Option<PathType>,
    /// `NCCL_NET_GDR_LEVEL`.
    pub net_gdr_level: Option<PathType>,
    /// `NCCL_NET_GDR_C2C` (default 1).
    pub net_gdr_c2c: Option<i64>,
    /// `NCCL_NVB_DISABLE` (default 0).
    pub nvb_disable: Option<i64>,
    /// `NCCL_PXN_DISABLE` (default 0; only 1 disables, paths.cc:819).
    pub pxn_disable: Option<i64>,
    /// `NCCL_PXN_C2C` (default 1).
    pub pxn_c2c: Option<i64>,
    /// `NCCL_IB_DISABLE` (default 0).
    pub ib_disable: Option<i64>,
    /// `NCCL_CROSS_NIC` (default 2).
    pub cross_nic: Option<i64>,
    /// `NCCL_MIN_NCHANNELS`, else the legacy `NCCL_MIN_NRINGS` (connect.cc:334-345).
    pub min_nchannels: Option<i64>,
    /// `NCCL_MAX_NCHANNELS`, else the legacy `NCCL_MAX_NRINGS` (connect.cc:348-358).
    pub max_nchannels: Option<i64>,
    /// `NCCL_MIN_CTAS` (init.cc:2013-2023).
    pub min_ctas: Option<i64>,
    /// `NCCL_MAX_CTAS` (init.cc:2025-2035).
    pub max_ctas: Option<i64>,
    /// `NCCL_NVLS_NCHANNELS` (init.cc:2170-2175, nvls.cc:222).
    pub nvls_nchannels: Option<i64>,
    /// `NCCL_MNNVL_ENABLE` (0 off, 1 force, 2 = across OS nodes, the default).
    pub mnnvl_enable: Option<i64>,
    /// The variables that took effect, as (name, value as given), in `VARIABLES` order.
    #[serde(skip)]
    pub applied: Vec<(String, String)>,
    /// Set, read by NCCL, but not modelled: (name, value, why).
    #[serde(skip)]
    pub not_modelled: Vec<(String, String, String)>,
    /// One line per value NCCL ignores, clamps or reads differently from how it is written.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// The channel bounds of `ncclTopoPostset` (connect.cc:492-506) after init's CTA checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChannelBounds {
    /// `min(ncclMaxNchannels(), config.maxCTAs)`.
    pub(crate) max: usize,
    /// `max(ncclMinNchannels(), config.minCTAs)`.
    pub(crate) min: usize,
    /// `config.minCTAs`, `config.maxCTAs` (NVLS channels are clamped to these alone, nvls.cc:234-235).
    pub(crate) min_ctas: usize,
    pub(crate) max_ctas: usize,
}

impl NcclEnv {
    /// The path knobs, as paths.cc uses them (`topo::paths::compute` takes them; topo does not read this file).
    pub(crate) fn path_options(&self) -> crate::topo::paths::PathOptions {
        crate::topo::paths::PathOptions {
            // paths.cc:288-291 ncclGetUserP2pLevel: NCCL_P2P_DISABLE=1 -> LOC, else NCCL_P2P_LEVEL.
            p2p_level: self.p2p_level,
            // paths.cc:80: any non-zero NCCL_NVB_DISABLE.
            nvb_disable: self.nvb_disable.unwrap_or(0) != 0,
            // paths.cc:672-687,819: only 1 disables PXN.
            pxn_disable: self.pxn_disable == Some(1),
            // paths.cc:828: non-zero = P2C.
            pxn_c2c: self.pxn_c2c.unwrap_or(1) != 0,
            // paths.cc:512-514.
            gdr_level: self.net_gdr_level,
            gdr_c2c: self.net_gdr_c2c.unwrap_or(1) != 0,
            // net_ib/init.cc:291: any non-zero NCCL_IB_DISABLE fails the IB plugin's init.
            ib_disable: self.ib_disable.unwrap_or(0) != 0,
            ib_hca: self.ib_hca.as_deref().map(crate::probe::net::IfList::parse),
        }
    }

    /// Read every variable of `VARIABLES` from this process's environment: the only place planner does.
    /// Values NCCL ignores or clamps become `warnings`; a value that is not text is a bad input (exit 2).
    /// (`NCCL_ALGO` / `NCCL_PROTO` syntax errors, which NCCL 2.24+ refuses, are the model's to check: the rule
    /// depends on the NCCL version of its table, `EnableMatrix`.)
    pub(crate) fn from_process() -> Result<NcclEnv> {
        let mut pairs = Vec::new();
        for name in VARIABLES {
            match std::env::var(name) {
                Ok(v) => pairs.push((name.to_string(), v)),
                Err(std::env::VarError::NotPresent) => {}
                Err(std::env::VarError::NotUnicode(v)) => {
                    return Err(Error::bad_input(format!(
                        "{name}={}: not valid UTF-8",
                        v.to_string_lossy()
                    )))
                }
            }
        }
        Ok(NcclEnv::from_pairs(pairs))
    }

    /// Build from (name, value) pairs, e.g. a log's "set by environment" lines; unknown names are ignored.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> NcclEnv {
        let mut env = NcclEnv::default();
        for (name, value) in pairs {
            env.set(&name, &value);
        }
        env.finish();
        env
    }

    /// Set one variable by name; returns false when the name is not one planner reads.
    pub(crate) fn set(&mut self, name: &str, value: &str) -> bool {
        let known = VARIABLES.contains(&name);
        if known {
            // A later line for the same name (a log's repeat) replaces the earlier one.
            self.applied.retain(|(n, _)| n != name);
            self.not_modelled.retain(|(n, _, _)| n != name);
            self.set_known(name, value);
        }
        known
    }

    fn set_known(&mut self, name: &str, value: &str) {
        if let Some((_, why)) = NOT_MODELLED.iter().find(|(n, _)| *n == name) {
            self.not_modelled
                .push((name.to_string(), value.to_string(), why.to_string()));
            return;
        }
        let applied = match name {
            // ncclGetEnv + parseList: any string, checked by the model.
            "NCCL_ALGO" => {
                self.algo = Some(value.to_string());
                true
            }
            "NCCL_PROTO" => {
                self.proto = Some(value.to_string());
                true
            }
            "NCCL_THREAD_THRESHOLDS" => {
                self.thread_thresholds = Some(value.to_string());
                true
            }
            "NCCL_IB_HCA" => {
                self.ib_hca = Some(value.to_string());
                true
            }
            "NCCL_P2P_DISABLE" => self.set_p2p_disable(value),
            "NCCL_P2P_LEVEL" => self.set_p2p_level(value),
            "NCCL_NET_GDR_LEVEL" => match self.level(name, value) {
                Some(level) => {
                    self.net_gdr_level = Some(level);
                    true
                }
                None => false,
            },
            _ => {
                let Some(v) = self.param(name, value) else {
                    return;
                };
                self.set_int(name, value, v)
            }
        };
        if applied {
            self.applied.push((name.to_string(), value.to_string()));
        }
    }

    /// An integer parameter (`NCCL_PARAM`) after NCCL's own checks; returns whether it takes effect.
    fn set_int(&mut self, name: &str, value: &str, v: i64) -> bool {
        match name {
            "NCCL_NTHREADS" => {
                // tuning.cc:17-34 getNthreads: Simple and LL threads in [64, 512], multiples of 32.
                self.check_threads(name, v, 64, 512);
                self.nthreads = Some(v);
            }
            "NCCL_LL128_NTHREADS" => {
                // tuning.cc:256-258: LL128 threads in [160, 640].
                self.check_threads(name, v, 160, 640);
                self.ll128_nthreads = Some(v);
            }
            "NCCL_NET_OVERHEAD" => self.net_overhead_ns = Some(v),
            "NCCL_PAT_ENABLE" => self.pat_enable = Some(v),
            "NCCL_LL128_C2C" => self.ll128_c2c = Some(v),
            "NCCL_NVLS_ENABLE" => self.nvls_enable = Some(v),
            "NCCL_COLLNET_ENABLE" => self.collnet_enable = Some(v),
            "NCCL_NET_GDR_C2C" => self.net_gdr_c2c = Some(v),
            "NCCL_NVB_DISABLE" => self.nvb_disable = Some(v),
            "NCCL_PXN_DISABLE" => {
                if v != 0 && v != 1 {
                    self.warn(format!(
                        "{name}={value}: NCCL disables PXN only for 1 (paths.cc:819), so PXN stays on"
                    ));
                }
                self.pxn_disable = Some(v);
            }
            "NCCL_PXN_C2C" => self.pxn_c2c = Some(v),
            "NCCL_MNNVL_ENABLE" => self.mnnvl_enable = Some(v),
            "NCCL_IB_DISABLE" => {
                if v != 0 {
                    self.warn(format!(
                        "{name}={value}: NCCL falls back to its socket transport; planner takes GPU Direct RDMA from \
                         every NIC but keeps the topology's NIC speeds (NCCL reads /sys/class/net/IF/speed, \
                         net_socket.cc:144-160)"
                    ));
                }
                self.ib_disable = Some(v);
            }
            "NCCL_CROSS_NIC" => {
                if !(0..=2).contains(&v) {
                    // search.cc:1080-1085,1236-1242: only 1 (always) and 2 (retry) allow crossing NICs.
                    self.warn(format!(
                        "{name}={value}: NCCL searches as with 0 (only 1 and 2 let a ring cross NICs, search.cc:1236-1242)"
                    ));
                }
                self.cross_nic = Some(v);
            }
            // connect.cc:328-358: -2 is the parameter's "unset"; the new name wins over the legacy one in
            // `channel_bounds`.
            "NCCL_MIN_NCHANNELS" | "NCCL_MIN_NRINGS" | "NCCL_MAX_NCHANNELS" | "NCCL_MAX_NRINGS" => {
                if v == -2 {
                    return false;
                }
                let legacy = name.ends_with("NRINGS");
                let slot = if name.starts_with("NCCL_MIN") {
                    &mut self.min_nchannels
                } else {
                    &mut self.max_nchannels
                };
                if legacy && slot.is_some() {
                    return false;
                }
                *slot = Some(v);
                self.check_channel_bound(name, value, v);
            }
            "NCCL_MIN_CTAS" | "NCCL_MAX_CTAS" => {
                // init.cc:2013-2035: a value <= 0 is ignored; above MAXCHANNELS it is capped (init.cc:2178-2188).
                if v <= 0 {
                    self.warn(format!(
                        "{name}={value}: too low, NCCL ignores it (init.cc:2015)"
                    ));
                    return false;
                }
                if v > MAX_CHANNELS as i64 {
                    self.warn(format!(
                        "{name}={value}: NCCL caps it to {MAX_CHANNELS} (init.cc:2178-2188)"
                    ));
                }
                if name == "NCCL_MIN_CTAS" {
                    self.min_ctas = Some(v);
                } else {
                    self.max_ctas = Some(v);
                }
            }
            "NCCL_NVLS_NCHANNELS" => {
                // nvls.cc:222,235: replaces the default, then clamped to [minCTAs, maxCTAs].
                if v < 1 {
                    self.warn(format!(
                        "{name}={value}: NCCL clamps NVLS channels to NCCL_MIN_CTAS (1 by default)"
                    ));
                }
                self.nvls_nchannels = Some(v);
            }
            _ => return false,
        }
        true
    }

    /// `NCCL_NTHREADS`-style checks of tuning.cc:17-34 (NCCL logs them at INFO and falls back).
    fn check_threads(&mut self, name: &str, v: i64, min: i64, max: i64) {
        let what = if v <= 0 {
            "not positive: NCCL uses its default thread counts".to_string()
        } else if v % 32 != 0 {
            format!("not a multiple of 32: NCCL uses {max} threads instead")
        } else if v > max {
            format!("above {max}: NCCL uses {max}")
        } else if v < min {
            format!("below {min}: NCCL uses {min}")
        } else {
            return;
        };
        self.warn(format!("{name}={v}: {what} (tuning.cc:17-34)"));
    }

    fn check_channel_bound(&mut self, name: &str, value: &str, v: i64) {
        if name.starts_with("NCCL_MIN") {
            if v > MAX_CHANNELS as i64 {
                self.warn(format!(
                    "{name}={value}: NCCL limits the minimum to {MAX_CHANNELS} channels (connect.cc:338-341)"
                ));
            } else if v < 0 {
                self.warn(format!(
                    "{name}={value}: NCCL uses a minimum of 0 channels (connect.cc:342)"
                ));
            }
        } else if v < 1 {
            self.warn(format!(
                "{name}={value}: NCCL uses 1 channel (connect.cc:353-356)"
            ));
        } else if v > MAX_CHANNELS as i64 {
            self.warn(format!(
                "{name}={value}: NCCL caps it to {MAX_CHANNELS} channels (connect.cc:352)"
            ));
        }
    }

    /// `ncclGetLevel` (paths.cc:244-278) for `NCCL_P2P_DISABLE`: only `strtol(value) == 1` disables P2P.
    fn set_p2p_disable(&mut self, value: &str) -> bool {
        let (v, rest) = strtoll(value);
        if v == Some(1) {
            self.p2p_level = Some(PathType::Loc);
            // Whatever order the pairs come in, NCCL_P2P_LEVEL is then not read.
            self.applied.retain(|(n, _)| n != "NCCL_P2P_LEVEL");
            return true;
        }
        if v != Some(0) || !rest.is_empty() {
            self.warn(format!(
                "NCCL_P2P_DISABLE={value}: NCCL disables P2P only for 1 (paths.cc:250-251), so it leaves P2P on"
            ));
        }
        false
    }

    fn set_p2p_level(&mut self, value: &str) -> bool {
        // NCCL reads NCCL_P2P_LEVEL only when NCCL_P2P_DISABLE did not set a level (paths.cc:255).
        if self.p2p_level == Some(PathType::Loc)
            && self.applied.iter().any(|(n, _)| n == "NCCL_P2P_DISABLE")
        {
            self.warn(format!(
                "NCCL_P2P_LEVEL={value}: not read, NCCL_P2P_DISABLE=1 comes first (paths.cc:247-255)"
            ));
            return false;
        }
        match self.level("NCCL_P2P_LEVEL", value) {
            Some(level) => {
                self.p2p_level = Some(level);
                true
            }
            None => false,
        }
    }

    /// `ncclGetLevel`'s level reading (paths.cc:255-277), with a warning where NCCL ignores the value.
    fn level(&mut self, name: &str, value: &str) -> Option<PathType> {
        let level = nccl_level(value);
        if level.is_none() {
            self.warn(format!(
                "{name}={value}: not a level NCCL knows (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, \
                 upper case, or a number 0-5), NCCL ignores it (paths.cc:258-277)"
            ));
        }
        level
    }

    /// `ncclLoadParam` (misc/param.cc:78-104): empty = unset; `strtoll(value, NULL, 0)`, so a value with no
    /// digits is 0 and trailing characters are dropped; only an out-of-range number falls back to the default.
    fn param(&mut self, name: &str, value: &str) -> Option<i64> {
        if value.is_empty() {
            return None;
        }
        match strtoll(value) {
            (Some(v), rest) => {
                if !rest.is_empty() {
                    self.warn(format!(
                        "{name}={value}: NCCL reads it with strtoll as {v} (misc/param.cc:95)"
                    ));
                }
                Some(v)
            }
            (None, _) => {
                self.warn(format!(
                    "{name}={value}: out of range, NCCL uses its default (misc/param.cc:96-98)"
                ));
                None
            }
        }
    }

    fn warn(&mut self, line: String) {
        if !self.warnings.contains(&line) {
            self.warnings.push(line);
        }
    }

    /// Order `applied` as `VARIABLES` lists them.
    fn finish(&mut self) {
        let rank = |n: &str| VARIABLES.iter().position(|v| *v == n).unwrap_or(usize::MAX);
        self.applied.sort_by_key(|(n, _)| rank(n));
        self.not_modelled.sort_by_key(|(n, _, _)| rank(n));
    }

    /// True when `NCCL_ALGO` or `NCCL_PROTO` is set (NCCL then calls an
    /// empty table a usage error instead of an internal one).
    pub(crate) fn user_lists_set(&self) -> bool {
        self.algo.is_some() || self.proto.is_some()
    }

    /// A flag (`--algo`, `--proto`) replaces a variable: it is no longer what was applied.
    pub(crate) fn overridden(&mut self, name: &str) {
        self.applied.retain(|(n, _)| n != name);
    }

    /// `NCCL_CROSS_NIC` as the search takes it: 0, 1, 2, or 3 for any other value (searched as 0, yet not 0
    /// when NCCL filters a graph file's cross-NIC graphs, search.cc:936).
    pub(crate) fn cross_nic_param(&self) -> u32 {
        match self.cross_nic {
            None => 2,
            Some(v @ 0..=2) => v as u32,
            Some(_) => 3,
        }
    }

    /// The runtime channel bounds NCCL's postset applies.
    pub(crate) fn channel_bounds(&self) -> ChannelBounds {
        let max_ch = MAX_CHANNELS as i64;
        // connect.cc:334-345 ncclMinNchannels: default 0, capped to MAXCHANNELS, negative -> 0.
        let min_n = self.min_nchannels.unwrap_or(0).clamp(0, max_ch);
        // connect.cc:348-358 ncclMaxNchannels: default MAXCHANNELS, capped, below 1 -> 1.
        let max_n = self.max_nchannels.unwrap_or(max_ch).clamp(1, max_ch);
        // init.cc: config defaults minCTAs 1, maxCTAs MAXCHANNELS; env <= 0 ignored; capped to MAXCHANNELS
        // (init.cc:2178-2188); minCTAs > maxCTAs -> minCTAs = maxCTAs (init.cc:2190-2194).
        let max_ctas = self.max_ctas.unwrap_or(max_ch).min(max_ch);
        let min_ctas = self.min_ctas.unwrap_or(1).min(max_ch).min(max_ctas);
        ChannelBounds {
            max: max_n.min(max_ctas) as usize,
            min: min_n.max(min_ctas) as usize,
            min_ctas: min_ctas as usize,
            max_ctas: max_ctas as usize,
        }
    }

    /// Print the warnings alone (an audit: the variables applied are the log's, shown in its `--json`).
    pub(crate) fn announce_warnings(&self) {
        for line in &self.warnings {
            eprintln!("planner: warning: {line}");
        }
    }

    /// `name -> value` of the variables applied (the `nccl_env` object of `--json`).
    pub(crate) fn applied_map(&self) -> BTreeMap<String, String> {
        self.applied.iter().cloned().collect()
    }

    /// Print, once, on stderr: the warnings, the variables applied and those set but not modelled.
    pub(crate) fn announce(&self) {
        for line in self.announce_lines() {
            eprintln!("{line}");
        }
    }

    /// The lines `announce` prints.
    pub(crate) fn announce_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .warnings
            .iter()
            .map(|w| format!("planner: warning: {w}"))
            .collect();
        if !self.applied.is_empty() {
            let list: Vec<String> = self
                .applied
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            lines.push(format!("NCCL_* applied: {}", list.join(", ")));
        }
        for (name, value, why) in &self.not_modelled {
            lines.push(format!("planner: {name}={value} not applied: {why}"));
        }
        lines
    }
}

/// The value of a `--json` document with the `nccl_env` object (name -> value) after its own fields.
#[derive(Serialize)]
pub(crate) struct WithNcclEnv<'a, T: Serialize> {
    #[serde(flatten)]
    pub(crate) doc: &'a T,
    pub(crate) nccl_env: BTreeMap<String, String>,
}

impl<'a, T: Serialize> WithNcclEnv<'a, T> {
    pub(crate) fn new(doc: &'a T, env: &NcclEnv) -> Self {
        WithNcclEnv {
            doc,
            nccl_env: env.applied_map(),
        }
    }
}

/// `ncclGetLevel`'s reading of a level (paths.cc:255-277): an exact, case-sensitive path name up to SYS, else a
/// value starting with a digit is an old numeric level (`strtol`, capped at 5); anything else is ignored.
pub fn nccl_level(value: &str) -> Option<PathType> {
    if let Some(t) = PathType::ALL
        .iter()
        .copied()
        .find(|t| *t <= PathType::Sys && t.nccl_name() == value)
    {
        return Some(t);
    }
    if value.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        const OLD_TO_NEW: [PathType; 6] = [
            PathType::Loc,
            PathType::Pix,
            PathType::Pxb,
            PathType::Phb,
            PathType::Sys,
            PathType::Sys,
        ];
        let old = strtoll(value).0.unwrap_or(i64::MAX).clamp(0, 5) as usize;
        return Some(OLD_TO_NEW[old]);
    }
    None
}

/// glibc's `strtoll(text, &end, 0)`: the value (0 when there are no digits; None when out of range, where glibc
/// sets ERANGE) and the text after the number.
pub(crate) fn strtoll(text: &str) -> (Option<i64>, &str) {
    let t = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let hex = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X"));
    let (radix, digits) = match hex {
        Some(h) if h.starts_with(|c: char| c.is_ascii_hexdigit()) => (16, h),
        _ if body.starts_with('0') => (8, body),
        _ => (10, body),
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    if end == 0 {
        return (Some(0), text);
    }
    let magnitude = i128::from_str_radix(&digits[..end], radix).unwrap_or(i128::MAX);
    let value = if neg { -magnitude } else { magnitude };
    (i64::try_from(value).ok(), &digits[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> NcclEnv {
        NcclEnv::from_pairs(pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())))
    }

    #[test]
    fn strtoll_reads_as_glibc() {
        // Checked against glibc: "abc" -> 0, "12abc" -> 12, "0x10" -> 16, " 7" -> 7, 2^64 -> ERANGE.
        assert_eq!(strtoll("abc"), (Some(0), "abc"));
        assert_eq!(strtoll("12abc"), (Some(12), "abc"));
        assert_eq!(strtoll("0x10"), (Some(16), ""));
        assert_eq!(strtoll("010"), (Some(8), ""));
        assert_eq!(strtoll(" 7"), (Some(7), ""));
        assert_eq!(strtoll("-3"), (Some(-3), ""));
        assert_eq!(strtoll("0x"), (Some(0), "x"));
        assert_eq!(strtoll("99999999999999999999").0, None);
    }

    #[test]
    fn levels_are_case_sensitive_names_or_old_numbers() {
        assert_eq!(nccl_level("NVL"), Some(PathType::Nvl));
        assert_eq!(nccl_level("SYS"), Some(PathType::Sys));
        assert_eq!(nccl_level("nvl"), None);
        assert_eq!(nccl_level("NET"), None);
        assert_eq!(nccl_level("2"), Some(PathType::Pxb));
        assert_eq!(nccl_level("9"), Some(PathType::Sys));
        assert_eq!(nccl_level("-1"), None);
    }

    #[test]
    fn p2p_disable_wins_over_p2p_level_and_only_1_disables() {
        let e = env(&[("NCCL_P2P_DISABLE", "1"), ("NCCL_P2P_LEVEL", "NVL")]);
        assert_eq!(e.p2p_level, Some(PathType::Loc));
        assert_eq!(e.applied, vec![("NCCL_P2P_DISABLE".into(), "1".into())]);
        assert_eq!(e.warnings.len(), 1);
        let e = env(&[("NCCL_P2P_DISABLE", "0"), ("NCCL_P2P_LEVEL", "PIX")]);
        assert_eq!(e.p2p_level, Some(PathType::Pix));
        assert!(e.warnings.is_empty());
        let e = env(&[("NCCL_P2P_DISABLE", "yes")]);
        assert_eq!(e.p2p_level, None);
        assert_eq!(e.warnings.len(), 1);
    }

    #[test]
    fn channel_bounds_follow_connect_and_init() {
        assert_eq!(
            NcclEnv::default().channel_bounds(),
            ChannelBounds {
                max: 64,
                min: 1,
                min_ctas: 1,
                max_ctas: 64
            }
        );
        let e = env(&[("NCCL_MAX_NCHANNELS", "0")]);
        assert_eq!(e.channel_bounds().max, 1);
        assert_eq!(e.warnings.len(), 1);
        // The new name wins whatever the order; the legacy one is not applied.
        let e = env(&[("NCCL_MAX_NRINGS", "8"), ("NCCL_MAX_NCHANNELS", "4")]);
        assert_eq!(e.channel_bounds().max, 4);
        let e = env(&[("NCCL_MAX_NCHANNELS", "4"), ("NCCL_MAX_NRINGS", "8")]);
        assert_eq!(e.channel_bounds().max, 4);
        assert_eq!(e.applied.len(), 1);
        let e = env(&[("NCCL_MIN_NCHANNELS", "100"), ("NCCL_MAX_CTAS", "16")]);
        let b = e.channel_bounds();
        assert_eq!((b.max, b.min), (16, 64));
        // "abc" is 0 to strtoll: a maximum of 0 channels, NCCL uses 1.
        assert_eq!(
            env(&[("NCCL_MAX_NCHANNELS", "abc")]).channel_bounds().max,
            1
        );
        // -2 is the parameter's own "unset".
        assert_eq!(
            env(&[("NCCL_MAX_NCHANNELS", "-2")]).channel_bounds().max,
            64
        );
    }

    #[test]
    fn not_modelled_variables_are_named_not_applied() {
        let e = env(&[("NCCL_BUFFSIZE", "8388608"), ("NCCL_CROSS_NIC", "5")]);
        assert_eq!(e.not_modelled.len(), 1);
        assert_eq!(e.applied, vec![("NCCL_CROSS_NIC".into(), "5".into())]);
        assert_eq!(e.cross_nic_param(), 3);
    }
}
