//! Command-line front end. Handlers stay thin: parse flags, call the stages,
//! hand the result to `report`.

pub mod audit;
pub mod explain;
pub mod source;

use crate::error::Result;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "planner",
    version,
    about = "Which collective algorithm and protocol should this machine run, why, and is that true"
)]
pub struct Cli {
    #[command(flatten)]
    pub source: source::SourceArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What the machine is: link matrix (nvidia-smi topo -m style) and NCCL's paths
    Topo(TopoArgs),
    /// List the built-in topologies
    Fixtures(FixturesArgs),
    /// NCCL's algorithm/protocol choice for a size, ranked with reasons; sweeps, plots, NCCL's own tables
    Explain(explain::ExplainArgs),
    /// Compare an NCCL_DEBUG=INFO log with the planner's model, cell by cell
    Audit(audit::AuditArgs),
}

#[derive(Debug, clap::Args)]
pub struct TopoArgs {
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct FixturesArgs {
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Topo(_args) => {
            let cluster = cli.source.load()?;
            println!(
                "{}: {} GPUs x {} node(s)",
                cluster.node.source,
                cluster.gpus_per_node(),
                cluster.n_nodes
            );
            Ok(())
        }
        Command::Explain(args) => explain::run(&cli.source, args),
        Command::Audit(args) => audit::run(&cli.source, args),
        Command::Fixtures(_args) => {
            for f in crate::topo::fixtures::FIXTURES {
                println!("{:24} {}", f.name, f.description);
            }
            Ok(())
        }
    }
}
