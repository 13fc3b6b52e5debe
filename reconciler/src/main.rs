fn main() -> std::process::ExitCode {
    reconciler::cli::Cli::parse_env().run()
}
