use clap::Parser;

fn main() {
    restore_default_sigpipe();
    let args: Vec<String> = std::env::args().collect();
    let cli = match planner::cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => exit_on_usage(err, &args),
    };
    if let Err(err) = planner::cli::run(cli) {
        eprintln!("planner: error: {err}");
        std::process::exit(err.exit_code());
    }
}

/// Help and version print as clap prints them; every usage error is one line and exits 2 (bad input).
fn exit_on_usage(err: clap::Error, args: &[String]) -> ! {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => err.exit(),
        _ => {
            eprintln!(
                "planner: error: {}",
                planner::cli::one_line_usage_error(&err, args)
            );
            std::process::exit(2);
        }
    }
}

/// Rust ignores SIGPIPE, so `planner topo | head` would panic on the closed
/// pipe. Restore the default action: the process ends quietly, as `cat` does.
fn restore_default_sigpipe() {
    // SAFETY: called once at the start of main, before any thread exists;
    // setting a signal disposition to SIG_DFL has no memory-safety effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
