//! The one way every command and test builds its inputs: where the topology comes from (a fixture, a file, the live
//! probe, else the built-in fixture) -> the cluster (`--nodes` copies of the node) -> the channels (NCCL's search, or
//! an `NCCL_GRAPH_FILE`) -> the tuning table -> the model.

use crate::error::{Error, Result};
use crate::model::input::NvlsFlag;
use crate::model::{table, Model, ModelInput, TuningTable};
use crate::nccl_env::NcclEnv;
use crate::probe::{self, ProbeError};
use crate::search::{self, Graphs, SearchOptions, SearchResult};
use crate::topo::paths::PathOptions;
use crate::topo::{
    build, cluster::MAX_NODES, fixtures, gpu_models, vendor, Cluster, NodeKind, Topology,
};
use crate::xml;

/// Where the topology comes from, and how many nodes of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Source {
    /// A built-in fixture by name.
    pub fixture: Option<String>,
    /// An NCCL topology XML file.
    pub topo: Option<String>,
    /// `--gpu MODEL`: fill a partial `topo` file (no `<gpu>`) from the table of known GPU models.
    pub gpu: Option<String>,
    /// `--nic-speed`: Gb/s of the NICs `gpu` fills in.
    pub nic_speed_gbits: Option<f64>,
    pub nodes: usize,
    /// µs added to every NIC.
    pub net_latency_us: f64,
    /// `--mnnvl on|off`; `None` = `NCCL_MNNVL_ENABLE` from the environment (default: across OS nodes).
    pub mnnvl: Option<crate::topo::mnnvl::MnnvlEnable>,
    /// NCCL's environment (read once by the CLI, or a log's): the path knobs shape the topology's paths.
    pub nccl_env: NcclEnv,
}

impl Source {
    /// A fixture or file was named (no probing).
    pub(crate) fn is_explicit(&self) -> bool {
        self.fixture.is_some() || self.topo.is_some()
    }

    /// The cluster: the named topology, else the live probe, else the built-in fixture (with a notice on stderr).
    pub fn load(&self) -> Result<Cluster> {
        self.check()?;
        let node = match self.load_machine_node()? {
            Some(node) => node,
            None => load_fixture_with(fixtures::DEFAULT_FIXTURE, &self.path_options())?,
        };
        self.cluster_of(node)
    }

    /// The cluster of this machine: the named topology, else the live probe; None when there is no GPU (never the
    /// built-in fixture, which would describe another machine).
    pub(crate) fn load_machine(&self) -> Result<Option<Cluster>> {
        self.check()?;
        if !self.is_explicit() {
            return match self.probe_live()? {
                Ok(node) => self.cluster_of(node).map(Some),
                Err(_no_gpu) => Ok(None),
            };
        }
        self.load().map(Some)
    }

    /// The path knobs of `nccl_env` (paths.cc).
    pub(crate) fn path_options(&self) -> PathOptions {
        self.nccl_env.path_options()
    }

    fn check(&self) -> Result<()> {
        if self.nodes == 0 || self.nodes > MAX_NODES {
            return Err(Error::bad_input(format!(
                "invalid --nodes {}: must be between 1 and {MAX_NODES}",
                self.nodes
            )));
        }
        if self.topo.is_none() && (self.gpu.is_some() || self.nic_speed_gbits.is_some()) {
            return Err(Error::bad_input(
                "--gpu and --nic-speed fill a partial topology file: they need --topo FILE",
            ));
        }
        if let Some(gbits) = self.nic_speed_gbits {
            if !(gbits.is_finite() && gbits > 0.0 && gbits <= 100_000.0) {
                return Err(Error::bad_input(format!(
                    "invalid --nic-speed {gbits}: expected Gb/s between 0 and 100000"
                )));
            }
        }
        crate::limits::check_net_latency_us("invalid --net-latency", self.net_latency_us)
    }

    fn cluster_of(&self, node: Topology) -> Result<Cluster> {
        // `--mnnvl on|off` where no GPU has a fabric identity would change nothing: refused, not ignored.
        if let Some(
            flag @ (crate::topo::mnnvl::MnnvlEnable::On | crate::topo::mnnvl::MnnvlEnable::Off),
        ) = self.mnnvl
        {
            if !crate::topo::mnnvl::has_fabric(&node) {
                return Err(Error::bad_input(format!(
                    "--mnnvl {}: {} has no GPU with an NVLink fabric identity (NVML fabric state; a GB200/GB300 \
                     tray such as --fixture gb200-nvl72-tray has one), so NCCL never uses MNNVL there and the flag \
                     would change nothing",
                    match flag {
                        crate::topo::mnnvl::MnnvlEnable::Off => "off",
                        _ => "on",
                    },
                    node.source
                )));
            }
        }
        // GB200/GB300 trays whose GPUs share an NVLink fabric: NCCL fuses them into one node (topo/mnnvl.rs).
        if crate::topo::mnnvl::has_fabric(&node) {
            let enable = match self.mnnvl {
                Some(e) => e,
                None => crate::topo::mnnvl::MnnvlEnable::from_value(self.nccl_env.mnnvl_enable),
            };
            let options = self.path_options();
            if let Some((cluster, _)) = crate::topo::mnnvl::cluster(
                &node,
                self.nodes,
                self.net_latency_us,
                enable,
                &options,
            )? {
                return Ok(cluster);
            }
        }
        if self.nodes > 1 && node.nodes(NodeKind::Net).is_empty() {
            return Err(Error::bad_input(format!(
                "--nodes {}: the topology ({}) has no NIC to join nodes through",
                self.nodes, node.source
            )));
        }
        Ok(Cluster {
            node,
            n_nodes: self.nodes,
            net_latency_us: self.net_latency_us,
        })
    }

    /// The named topology, else the live probe; None (after a notice) when no GPU is found.
    fn load_machine_node(&self) -> Result<Option<Topology>> {
        if let Some(name) = &self.fixture {
            return load_fixture_with(name, &self.path_options()).map(Some);
        }
        if let Some(path) = &self.topo {
            let text = crate::units::read_input_file(path)?;
            let root = xml::parse(&text, path)?;
            let (root, label) = self.complete_topo_file(root, path)?;
            return build::from_xml_with(&root, &label, &self.path_options()).map(Some);
        }
        match self.probe_live()? {
            Ok(node) => Ok(Some(node)),
            Err(why) => {
                eprintln!(
                    "planner: no GPU found ({why}); using built-in fixture {}; pass --fixture or --topo to choose",
                    fixtures::DEFAULT_FIXTURE
                );
                Ok(None)
            }
        }
    }

    /// This machine's topology from the live probe (its warnings on stderr), with the driver's CPU/NUMA affinity
    /// kept beside NCCL's XML; `Ok(Err(why))` when there is no GPU.
    fn probe_live(&self) -> Result<std::result::Result<Topology, String>> {
        match probe::probe_detailed() {
            Ok(probed) => {
                eprint!("{}", probed.warnings);
                let mut node =
                    build::from_xml_with(&probed.xml, "live probe", &self.path_options())?;
                node.driver_affinity = crate::topo::DriverAffinity::from_facts(&probed.facts);
                Ok(Ok(node))
            }
            Err(ProbeError::Unavailable(why)) => Ok(Err(why)),
            Err(ProbeError::Failed(e)) => Err(e),
        }
    }
}

impl Source {
    /// A `--topo` file as NCCL would use it: a complete file as it is; a partial vendor file (no `<gpu>`) filled
    /// from `--gpu MODEL`, else merged with the live probe as NCCL merges NCCL_TOPO_FILE with what it detects.
    /// Returns the XML and the name to give it.
    fn complete_topo_file(&self, root: xml::XmlNode, path: &str) -> Result<(xml::XmlNode, String)> {
        if !vendor::is_partial(&root) {
            if self.gpu.is_some() || self.nic_speed_gbits.is_some() {
                return Err(Error::bad_input(format!(
                    "{path}: --gpu and --nic-speed fill a partial topology file, and this one already has <gpu> elements"
                )));
            }
            return Ok((root, path.to_string()));
        }
        if let Some(name) = &self.gpu {
            let model = gpu_models::find(name).ok_or_else(|| {
                Error::bad_input(format!(
                    "unknown --gpu '{name}'; known models: {}",
                    gpu_models::names().join(", ")
                ))
            })?;
            let nic = vendor::NicChoice {
                speed_gbits: self.nic_speed_gbits,
            };
            let (filled, warnings) = vendor::fill_from_model(&root, model, nic, path)?;
            for w in warnings {
                eprintln!("planner: warning: {w}");
            }
            return Ok((filled, format!("{path} + --gpu {name}")));
        }
        if self.nic_speed_gbits.is_some() {
            return Err(Error::bad_input(format!(
                "{path}: --nic-speed needs --gpu MODEL (it sets the NICs --gpu fills in)"
            )));
        }
        match probe::probe() {
            Ok(detected) => Ok((
                vendor::merge_with_detected(&root, &detected),
                format!("{path} merged with the live probe"),
            )),
            Err(ProbeError::Unavailable(why)) => Err(Error::bad_input(format!(
                "{path}: a partial topology file (no <gpu> under its <pci> entries), which NCCL merges with the GPUs \
                 it detects, and no GPU was found here ({why}); pass --gpu MODEL to fill them from a table ({})",
                gpu_models::names().join(", ")
            ))),
            Err(ProbeError::Failed(e)) => Err(e),
        }
    }
}

/// A built-in topology by name, with NCCL's default paths.
pub fn load_fixture(name: &str) -> Result<Topology> {
    load_fixture_with(name, &PathOptions::default())
}

/// A built-in topology by name, its paths under `options`.
pub(crate) fn load_fixture_with(name: &str, options: &PathOptions) -> Result<Topology> {
    let fixture = fixtures::find(name).ok_or_else(|| {
        Error::bad_input(format!(
            "unknown fixture '{name}'; known fixtures: {}",
            fixtures::names().join(", ")
        ))
    })?;
    let source = format!("fixture {name}");
    let root = xml::parse(fixture.xml, &source)?;
    build::from_xml_with(&root, &source, options)
}

/// The tuning table: a file, a version, the version a log names, the libnccl found here, or the newest.
pub fn choose_table(
    tuning_table: Option<&str>,
    nccl_version: Option<&str>,
    log_version: Option<&str>,
) -> Result<TuningTable> {
    if let Some(path) = tuning_table {
        return TuningTable::load_file(path);
    }
    if let Some(v) = nccl_version {
        let (table, notice) = table::builtin_for_version(v)?;
        if let Some(notice) = notice {
            eprintln!("{notice}");
        }
        return Ok(table);
    }
    let found = match log_version {
        Some(v) => {
            let fam = table::family_of(v)?;
            let mut it = fam.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
            Some((
                it.next().unwrap_or(0),
                it.next().unwrap_or(0),
                format!("the log's NCCL {v}"),
            ))
        }
        None => crate::probe::nccl_version::detect()
            .map(|v| (v.major, v.minor, format!("{} {}", v.library, v.text()))),
    };
    match found {
        Some((major, minor, what)) => {
            let (family, exact, notice) = table::live_family(major, minor);
            if let Some(notice) = notice {
                eprintln!("{notice} ({what})");
            } else if !exact {
                eprintln!(
                    "planner: no tuning table for NCCL {major}.{minor} ({what}); using the {family} table"
                );
            }
            table::builtin(family)
        }
        None => table::builtin(table::newest_family()),
    }
}

/// NCCL's channels: the search, or the graphs of an `NCCL_GRAPH_FILE` (`graph_file`); also says where they came from.
pub fn channels(
    cluster: &Cluster,
    opts: &SearchOptions,
    graph_file: Option<&str>,
) -> Result<(SearchResult, String)> {
    match graph_file {
        Some(path) => Ok((
            search::load_graph_file_with(path, cluster, opts)?,
            format!("from {path}"),
        )),
        None => Ok((search::search(cluster, opts)?, "searched".to_string())),
    }
}

/// The search options NCCL's init would use on `cluster` under `env`.
pub fn search_options(
    cluster: &Cluster,
    env: &NcclEnv,
    nvls_supported: bool,
) -> Result<SearchOptions> {
    let coll_nic = cluster
        .node
        .nodes(NodeKind::Net)
        .iter()
        .filter_map(|&i| cluster.node.node(i).net())
        .any(|n| n.coll);
    let bounds = env.channel_bounds();
    Ok(SearchOptions {
        nvls: nvls_supported,
        collnet: env.collnet_enable == Some(1) && coll_nic,
        // search.cc:16,1080-1085.
        cross_nic: env.cross_nic_param(),
        max_channels: bounds.max,
        min_channels: bounds.min,
        family: search::rules::NEWEST,
    })
}

/// The graphs NCCL's init would build (or `graph_file`'s) and the runtime channel count.
pub fn graphs_for(
    cluster: &Cluster,
    env: &NcclEnv,
    nvls_supported: bool,
    graph_file: Option<&str>,
) -> Result<(Graphs, usize)> {
    let opts = search_options(cluster, env, nvls_supported)?;
    let (result, _origin) = channels(cluster, &opts, graph_file)?;
    let n_channels = result.connection.n_channels;
    Ok((result.graphs, n_channels))
}

/// Cluster, channels and tuning table -> NCCL's model, with NVLS requested as `nvls` says.
pub fn build_model(
    cluster: &Cluster,
    graph_file: Option<&str>,
    table: TuningTable,
    env: NcclEnv,
    nvls: NvlsFlag,
) -> Result<Model> {
    let nvls_state = ModelInput::nvls_request(cluster, &env, nvls);
    // The table's family also picks the search's rules (`search::rules`).
    let mut opts = search_options(cluster, &env, nvls_state.supported())?;
    opts.family = table.version;
    let (result, _origin) = channels(cluster, &opts, graph_file)?;
    let n_channels = result.connection.n_channels;
    model_from_graphs(cluster, &result.graphs, n_channels, table, env, nvls)
}

/// NCCL's model on given graphs (e.g. a log's own).
pub fn model_from_graphs(
    cluster: &Cluster,
    graphs: &Graphs,
    n_channels: usize,
    table: TuningTable,
    env: NcclEnv,
    nvls: NvlsFlag,
) -> Result<Model> {
    let nvls_state = ModelInput::nvls_request(cluster, &env, nvls);
    let input = ModelInput::from_graphs(cluster, graphs, n_channels, &env, nvls_state, &table)?;
    Model::new(input, env, table)
}
