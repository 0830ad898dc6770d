use clap::Parser;

fn main() {
    restore_default_sigpipe();
    let cli = planner::cli::Cli::parse();
    if let Err(err) = planner::cli::run(cli) {
        eprintln!("planner: error: {err}");
        std::process::exit(err.exit_code());
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
