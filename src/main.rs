use clap::Parser;

fn main() {
    let cli = planner::cli::Cli::parse();
    if let Err(err) = planner::cli::run(cli) {
        eprintln!("planner: error: {err}");
        std::process::exit(err.exit_code());
    }
}
