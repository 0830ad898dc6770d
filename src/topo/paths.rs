//! NCCL's path computation (`src/graph/paths.cc`).
