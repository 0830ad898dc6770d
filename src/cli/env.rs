//! `planner env`: the shell lines that make NCCL load planner's tuner plugin with a plan, for
//! `eval "$(planner env --plan plan.json)"`.

use crate::error::{Error, Result};
use crate::nccl::tuner_plugin::{self, Conflict, PLUGIN_FILE};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub(crate) struct EnvArgs {
    /// The plan NCCL's tuner should apply (default: plan.json, where `planner tune` writes it)
    #[arg(long, value_name = "PLAN.json")]
    pub(crate) plan: Option<String>,
    /// The tuner plugin (default: libnccl_tuner_planner.so next to the planner binary, or in ../lib as the wheel installs it)
    #[arg(long, value_name = "PATH")]
    pub(crate) tuner_plugin: Option<String>,
}

pub(crate) fn run(args: &EnvArgs) -> Result<()> {
    let plan_given = args.plan.is_some();
    let plan_arg = args.plan.as_deref().unwrap_or("plan.json");
    let plugin = match &args.tuner_plugin {
        Some(p) => match crate::fsio::not_a_regular_file(Path::new(p)) {
            None => PathBuf::from(p),
            Some(why) => return Err(Error::bad_input(format!("--tuner-plugin {p}: {why}"))),
        },
        None => {
            let exe = std::env::current_exe().map_err(|e| {
                Error::runtime(format!(
                    "cannot find the planner binary to look for {PLUGIN_FILE}: {e}"
                ))
            })?;
            tuner_plugin::find_installed(&exe).ok_or_else(|| {
                let tried: Vec<String> = tuner_plugin::plugin_candidates(&exe)
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                Error::runtime(format!(
                    "no {PLUGIN_FILE} installed (looked for {}); build it with `cargo build --release`, install the \
                     wheel, or give --tuner-plugin PATH",
                    tried.join(" and ")
                ))
            })?
        }
    };
    let plugin = std::path::absolute(&plugin).unwrap_or(plugin);
    let plan = std::path::absolute(plan_arg).unwrap_or_else(|_| PathBuf::from(plan_arg));
    // Anything there is read through fsio, which refuses what is not a regular file (a FIFO would block).
    if plan.exists() {
        let text = crate::units::read_input_file(plan_arg)?;
        nccl_tuner_planner::plan::Plan::from_json(&text).map_err(|e| {
            Error::bad_input(format!("--plan {}: not a valid tuner plan: {e}", plan_arg))
        })?;
    } else if plan_given {
        return Err(Error::bad_input(format!(
            "--plan {}: no such file",
            plan_arg
        )));
    } else {
        eprintln!(
            "planner: {} does not exist yet; `planner tune --from RESULTS.json -o {}` makes it",
            plan.display(),
            plan_arg
        );
    }
    if let Some(line) =
        Conflict::of(tuner_plugin::from_process().as_deref(), &plugin).describe(&plugin)
    {
        eprintln!("planner: {line}");
    }
    println!(
        "export NCCL_TUNER_PLUGIN={}",
        tuner_plugin::shell_word(&plugin.display().to_string())
    );
    println!(
        "export PLANNER_TUNER_PLAN={}",
        tuner_plugin::shell_word(&plan.display().to_string())
    );
    Ok(())
}
