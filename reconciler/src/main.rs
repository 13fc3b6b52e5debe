/// mimalloc, not glibc's malloc: at 100,000 nodes glibc's allocations in the reconciler's
/// large, long-lived heap were a fifth of an idle poll's CPU (docs/reconciler.md,
/// "Larger fleets").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    reconciler::cli::Cli::parse_env().run()
}
