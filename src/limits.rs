//! NCCL's fixed constants that several stages share (topology, search, executor), one definition each.
//! Tuning constants that vary by version are data in `tuning-tables/`.

/// `LOC_BW` (`src/graph/topo.h`): GB/s of a node's path to itself, a link that is never a bottleneck.
pub const LOC_BW: f64 = 5000.0;
/// `MAXCHANNELS` (`src/include/device.h`): the most channels (CTAs) one communicator or collective uses.
pub const MAX_CHANNELS: usize = 64;
/// `NCCL_MAX_TREE_ARITY` (`src/include/device.h`): children per tree node.
pub const MAX_TREE_ARITY: usize = 3;
/// `NCCL_MAX_NTHREADS` (`src/include/device.h`): threads per CTA.
pub const MAX_THREADS: usize = 640;
