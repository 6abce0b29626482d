//! `warrant completion`'s command line.

use clap::{Args, ValueEnum};

/// `warrant completion`.
#[derive(Debug, Args)]
pub(crate) struct CompletionArgs {
    /// The shell to complete in.
    #[arg(value_enum, value_name = "SHELL")]
    pub(crate) shell: CompletionShell,
}

/// The shells `warrant completion` writes a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CompletionShell {
    /// bash (with the bash-completion package).
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
}
