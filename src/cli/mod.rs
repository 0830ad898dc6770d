//! Command-line front end. Handlers stay thin: parse flags, call the stages,
//! hand the result to `report`.

pub mod run;
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
    /// Run one plan with planner's own kernels on the local GPUs: time, algbw, busbw, #wrong
    Run(run::RunArgs),
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
        Command::Run(args) => run::run(args, &cli.source),
        Command::Fixtures(_args) => {
            for f in crate::topo::fixtures::FIXTURES {
                println!("{:24} {}", f.name, f.description);
            }
            Ok(())
        }
    }
}
