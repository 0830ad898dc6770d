//! The init tuning table as NCCL prints it: blocks of up to three algorithms (`Algorithm`, `Protocol`,
//! `Max NThreads`, then one row per function), assembled into one `LogTable`.

use super::{LogCell, LogTable};
use crate::error::{Error, Result};
use crate::model::cells::{NUM_ALGORITHMS, NUM_FUNCTIONS, NUM_PROTOCOLS};
use crate::model::{Algo, Coll};

/// Assembles the init table block by block: `Algorithm`, `Protocol`,
/// `Max NThreads`, then one row per function.
#[derive(Default)]
pub(super) struct TableBuilder {
    /// Algorithms of the open block, and how many function rows it has read.
    block: Option<(Vec<Algo>, usize, bool, bool, usize)>,
    pub(super) table: Option<LogTable>,
    /// Algorithms whose block was read completely.
    pub(super) seen: Vec<Algo>,
}

impl TableBuilder {
    pub(super) fn open(&self) -> bool {
        self.block.is_some()
    }

    /// Lines that belong to an open block.
    pub(super) fn accepts(&self, msg: &str) -> bool {
        msg.starts_with("  Protocol    |")
            || msg.starts_with(" Max NThreads |")
            || Coll::ALL
                .iter()
                .any(|c| msg.starts_with(&format!("{:>13} |", c.nccl_name())))
    }

    pub(super) fn header(&mut self, msg: &str, line: usize) -> std::result::Result<(), String> {
        let names: Vec<&str> = msg
            .split('|')
            .skip(1)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let algos = names
            .iter()
            .map(|n| {
                Algo::ALL
                    .into_iter()
                    .find(|a| a.nccl_name() == *n)
                    .ok_or_else(|| format!("unknown algorithm '{n}' in the tuning table header"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if algos.is_empty() || algos.len() > 3 {
            return Err("tuning table header must name 1 to 3 algorithms".to_string());
        }
        if self.table.is_none() {
            self.table = Some(LogTable {
                max_threads: vec![vec![None; NUM_PROTOCOLS]; NUM_ALGORITHMS],
                max_threads_line: vec![0; NUM_ALGORITHMS],
                cells: vec![vec![vec![None; NUM_PROTOCOLS]; NUM_ALGORITHMS]; NUM_FUNCTIONS],
                algorithms: Vec::new(),
                line,
            });
        }
        self.block = Some((algos, 0, false, false, line));
        Ok(())
    }

    pub(super) fn row(&mut self, msg: &str, line: usize) -> std::result::Result<(), String> {
        let Some((algos, rows, proto_seen, threads_seen, _)) = self.block.as_mut() else {
            return Ok(());
        };
        let table = self
            .table
            .as_mut()
            .ok_or("tuning table row before its header")?;
        let (label, rest) = msg.split_once('|').ok_or("tuning table row without '|'")?;
        let label = label.trim();
        let cells: Vec<&str> = rest
            .split('|')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        match label {
            "Protocol" => {
                *proto_seen = true;
            }
            "Max NThreads" => {
                if cells.len() != algos.len() * 3 {
                    return Err(format!(
                        "Max NThreads row has {} values, expected {}",
                        cells.len(),
                        algos.len() * 3
                    ));
                }
                for (k, cell) in cells.iter().enumerate() {
                    let v = cell
                        .parse::<i64>()
                        .map_err(|_| format!("Max NThreads value '{cell}' is not a number"))?;
                    table.max_threads[algos[k / 3] as usize][k % 3] = Some(v);
                    table.max_threads_line[algos[k / 3] as usize] = line;
                }
                *threads_seen = true;
            }
            func => {
                let coll = Coll::ALL
                    .into_iter()
                    .find(|c| c.nccl_name() == func)
                    .ok_or_else(|| format!("unknown function '{func}' in the tuning table"))?;
                if cells.len() != algos.len() * 3 {
                    return Err(format!(
                        "{func} row has {} cells, expected {} (a cut line?)",
                        cells.len(),
                        algos.len() * 3
                    ));
                }
                for (k, cell) in cells.iter().enumerate() {
                    let (lat, bw) = cell
                        .split_once('/')
                        .ok_or_else(|| format!("cell '{cell}' is not latency/bandwidth"))?;
                    let (lat, bw) = (lat.trim(), bw.trim());
                    if lat.parse::<f64>().is_err() || bw.parse::<f64>().is_err() {
                        return Err(format!("cell '{cell}' is not two numbers"));
                    }
                    table.cells[coll as usize][algos[k / 3] as usize][k % 3] = Some(LogCell {
                        latency: lat.to_string(),
                        bandwidth: bw.to_string(),
                        line,
                    });
                }
                *rows += 1;
            }
        }
        Ok(())
    }

    /// Close the open block; a block cut short is a truncated log.
    pub(super) fn finish(&mut self, source: &str, line: usize) -> Result<()> {
        if let Some((algos, rows, proto_seen, threads_seen, start)) = self.block.take() {
            if rows != 5 || !proto_seen || !threads_seen {
                return Err(Error::bad_input(format!(
                    "{source}:{line}: the tuning table block for {} that starts at line {start} is cut short ({rows} of 5 function rows)",
                    algos.iter().map(|a| a.nccl_name()).collect::<Vec<_>>().join("/")
                )));
            }
            self.seen.extend(algos);
        }
        Ok(())
    }
}
