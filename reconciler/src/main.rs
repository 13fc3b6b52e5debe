use clap::Parser;

fn main() -> std::process::ExitCode {
    reconciler::cli::Cli::parse().run()
}
