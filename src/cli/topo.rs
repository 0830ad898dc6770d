//! `planner topo` and `planner fixtures`.

use super::source::SourceArgs;
use crate::error::{Error, Result};
use crate::report::topo as view;
use crate::topo::fixtures;
use crate::xml;

#[derive(Debug, clap::Args)]
pub struct TopoArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Machine-readable output (link matrix, NCCL paths, NICs; docs/json.md)
    #[arg(long, conflicts_with_all = ["xml", "dot"])]
    pub json: bool,
    /// Write the topology as NCCL topology XML (loadable with NCCL_TOPO_FILE)
    #[arg(long, conflicts_with = "dot")]
    pub xml: bool,
    /// Write NCCL's topology graph in Graphviz DOT
    #[arg(long)]
    pub dot: bool,
    /// Write the output to FILE instead of stdout
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct FixturesArgs {
    /// Machine-readable output (docs/json.md)
    #[arg(long)]
    pub json: bool,
}

pub fn run_topo(args: &TopoArgs) -> Result<()> {
    let cluster = args.source.source().load()?;
    let text = if args.xml {
        xml::write(&cluster.node.xml)
    } else if args.dot {
        view::render_dot(&cluster.node)
    } else {
        let report = view::report(&cluster);
        if args.json {
            // view::render_json's text with the `nccl_env` object (the path knobs applied) after the report.
            let doc = crate::nccl_env::WithNcclEnv::new(&report, &args.source.nccl_env);
            let mut text = crate::report::json::render(&doc, "")?;
            text.push('\n');
            text
        } else {
            crate::report::text(&view::render_text(&report)).into_owned()
        }
    };
    emit(&text, args.out.as_deref())
}

pub fn run_fixtures(args: &FixturesArgs) -> Result<()> {
    let text = if args.json {
        view::render_fixtures_json(fixtures::FIXTURES, fixtures::DEFAULT_FIXTURE)
    } else {
        view::render_fixtures(fixtures::FIXTURES, fixtures::DEFAULT_FIXTURE)
    };
    emit(&text, None)
}

fn emit(text: &str, output: Option<&str>) -> Result<()> {
    match output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| Error::bad_input(format!("{path}: cannot write: {e}"))),
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            // A closed pipe (`planner topo | head`) is not an error worth a message.
            match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(Error::runtime(format!("cannot write to stdout: {e}")))
                }
                _ => Ok(()),
            }
        }
    }
}
