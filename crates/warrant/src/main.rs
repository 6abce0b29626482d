//! The `warrant` binary: command line, configuration and wiring. The behaviour lives in the
//! library crates; this crate only assembles them.

mod agent;
mod audit;
mod auth;
mod cli;
mod completion;
mod credential;
mod duration;
mod export;
#[cfg(test)]
mod fuzz_corpus;
mod holder;
mod hsm;
mod injection;
mod jsonlog;
mod keydir;
mod keys;
mod kms;
mod listen;
mod local;
mod logging;
mod logwriter;
mod objects;
mod podcert;
mod running;
mod serve;
mod signer;
mod verify;

use std::process::ExitCode;

use clap::Parser;

/// How every command's one line of failure reads: an error with its causes.
pub(crate) use warrant_client::causes;

use crate::cli::{Cli, Command, DiscoveryCommand};

/// mimalloc rather than glibc's allocator: a request allocates and frees many small buffers
/// across two threads, where glibc's malloc took about a tenth of the CPU under load
/// (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Before any thread starts: taking the socket clears its variables from the environment.
    let inherited = listen::inherited();
    let cli = Cli::parse();
    // A failure is said once: by the server as a log line (its output is its log, perhaps
    // JSON, perhaps collected); by every other command as one `warrant: …` line, which is
    // what a person, kubectl (an exec plugin's stderr) or a pod's events (a probe's) show.
    let server = matches!(cli.command, Command::Serve(_));
    // Held until the command ends; dropping it writes out the lines still queued (before the
    // process exits, and before a failure's message below, so the two keep their order).
    let log_writer = match logging::init(cli.log_format, cli.log_level.as_deref(), cli.verbosity) {
        Ok(guard) => guard,
        Err(error) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("warrant: cannot start the log's writer thread: {error}");
            }
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Serve(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(Into::into)
            .and_then(|runtime| runtime.block_on(serve::run(*args, inherited?))),
        Command::LocalSetup(args) => local_setup(&args),
        Command::Verify(args) => {
            current_thread().and_then(|runtime| runtime.block_on(verify::run(args)))
        }
        Command::Keys(command) => {
            current_thread().and_then(|runtime| runtime.block_on(keydir::run(command)))
        }
        Command::Discovery(DiscoveryCommand::Export(args)) => {
            current_thread().and_then(|runtime| runtime.block_on(export::run(&args)))
        }
        Command::Discovery(DiscoveryCommand::Publish(args)) => {
            current_thread().and_then(|runtime| runtime.block_on(export::publish(&args)))
        }
        Command::Credential(args) => {
            current_thread().and_then(|runtime| runtime.block_on(credential::run(&args)))
        }
        Command::TokenAgent(args) => {
            current_thread().and_then(|runtime| runtime.block_on(agent::run(&args)))
        }
        Command::ProbeSigner(args) => {
            current_thread().and_then(|runtime| runtime.block_on(signer::probe(&args)))
        }
        Command::Completion(args) => completion::write(args.shell, &mut std::io::stdout().lock())
            .map_err(|e| format!("writing the completion script: {e}").into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Startup errors go to the terminal as a sentence, with their causes.
            let message = causes(e.as_ref());
            if server {
                tracing::error!("{message}");
                drop(log_writer);
            } else {
                drop(log_writer);
                #[allow(clippy::print_stderr)]
                {
                    eprintln!("warrant: {message}");
                }
            }
            ExitCode::FAILURE
        }
    }
}

/// A runtime for the commands that do a little I/O and exit.
fn current_thread() -> Result<tokio::runtime::Runtime, Box<dyn std::error::Error>> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn local_setup(args: &cli::LocalSetupArgs) -> Result<(), Box<dyn std::error::Error>> {
    let files = local::setup(args, warrant_clock::Clock::System.now())?;
    tracing::info!(dir = %files.dir.display(), "local setup ready");
    Ok(())
}
