//! `planner topo` and `planner fixtures`.

use super::source::SourceArgs;
use crate::error::{Error, Result};
use crate::report::topo as view;
use crate::topo::fixtures;
use crate::xml;
use std::io::{BufWriter, Write};

#[derive(Debug, clap::Args)]
pub(crate) struct TopoArgs {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    /// Machine-readable output (link matrix, NCCL paths, NICs; docs/json.md)
    #[arg(long, conflicts_with_all = ["xml", "dot"])]
    pub(crate) json: bool,
    /// Write the topology as NCCL topology XML (loadable with NCCL_TOPO_FILE)
    #[arg(long, conflicts_with = "dot")]
    pub(crate) xml: bool,
    /// Write NCCL's topology graph in Graphviz DOT
    #[arg(long)]
    pub(crate) dot: bool,
    /// Write the output to FILE instead of stdout
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub(crate) out: Option<String>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct FixturesArgs {
    /// Machine-readable output (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run_topo(args: &TopoArgs) -> Result<()> {
    super::source::preflight::output(args.out.as_deref())?;
    let cluster = args.source.source().load()?;
    let out = args.out.as_deref();
    if args.xml {
        return emit(&xml::write(&cluster.node.xml), out);
    }
    if args.dot {
        return emit(&view::render_dot(&cluster.node), out);
    }
    let report = view::report(&cluster);
    if args.json {
        // The report with the `nccl_env` object (the path knobs applied) after it, written item by item: at
        // 576 GPUs x 576 NICs it is 100 MB of text.
        let head = view::json_head(&report);
        let doc = crate::nccl_env::WithNcclEnv::new(&head, &args.source.nccl_env);
        return write_out(out, |w| view::write_json(w, &doc, &report));
    }
    emit(&crate::report::text(&view::render_text(&report)), out)
}

pub(crate) fn run_fixtures(args: &FixturesArgs) -> Result<()> {
    let text = if args.json {
        view::render_fixtures_json(fixtures::FIXTURES, fixtures::DEFAULT_FIXTURE)
    } else {
        view::render_fixtures(fixtures::FIXTURES, fixtures::DEFAULT_FIXTURE)
    };
    emit(&text, None)
}

fn emit(text: &str, output: Option<&str>) -> Result<()> {
    write_out(output, |w| w.write_all(text.as_bytes()))
}

/// `write` to FILE (`-o`) or stdout, buffered.
fn write_out(
    output: Option<&str>,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    match output {
        Some(path) => crate::fsio::write_output_with(path, write),
        None => {
            let mut w = BufWriter::new(std::io::stdout().lock());
            // A closed pipe (`planner topo | head`) is not an error worth a message.
            match write(&mut w).and_then(|_| w.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(Error::runtime(format!("cannot write to stdout: {e}")))
                }
                _ => Ok(()),
            }
        }
    }
}
