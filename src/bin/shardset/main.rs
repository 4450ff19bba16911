//! The `shardset` command line: a thin layer over the library. Each command
//! lives in a module that owns its arguments (a `clap::Args` struct) and
//! runs it; here only the parser, the dispatch and the exit codes. The
//! modules share the helpers of `fmt`.

mod build;
mod demo;
mod edit;
mod fmt;
mod inspect;
mod manage;
mod progress;
mod report;
mod rows;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::fmt::CliError;

#[derive(Parser)]
#[command(
    name = "shardset",
    version,
    about = "Build, inspect and read sharded dataset caches"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Each command's help text is the doc comment of its arguments struct, in
// the module that runs it.
#[derive(Subcommand)]
enum Cmd {
    Demo(demo::DemoArgs),
    Build(build::BuildArgs),
    Inspect(inspect::InspectArgs),
    Cat(rows::CatArgs),
    Export(rows::ExportArgs),
    Verify(inspect::VerifyArgs),
    Report(report::ReportArgs),
    Edit(edit::EditArgs),
    Log(edit::LogArgs),
    Why(manage::WhyArgs),
    Ls(manage::LsArgs),
    Download(manage::DownloadArgs),
    Gc(manage::GcArgs),
}

/// Rust ignores SIGPIPE, so printing into a closed pipe (`shardset ls |
/// head -1`) would be an error in every `println!`; like other Unix tools,
/// end quietly instead.
fn default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists;
    // SIG_DFL is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    default_sigpipe();
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Demo(args) => demo::run(args),
        Cmd::Build(args) => build::run(args),
        Cmd::Inspect(args) => inspect::inspect(args),
        Cmd::Cat(args) => rows::cat(args),
        Cmd::Export(args) => rows::export(args),
        Cmd::Verify(args) => inspect::verify(args),
        Cmd::Report(args) => report::report(args),
        Cmd::Edit(args) => edit::edit(args),
        Cmd::Log(args) => edit::log(args),
        Cmd::Why(args) => manage::why(args),
        Cmd::Ls(args) => manage::ls(args),
        Cmd::Download(args) => manage::download(args),
        Cmd::Gc(args) => manage::gc(args),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            match e {
                CliError::Usage(_) => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// clap's own checks of the whole parser (names, ids, defaults, requires).
    #[test]
    fn parser_is_consistent() {
        Cli::command().debug_assert();
    }
}
