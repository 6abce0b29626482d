//! `warrant completion bash|zsh|fish`: the shell completion script, generated from the same
//! command line the binary parses, so it never lists a flag warrant does not have.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Cli, CompletionShell};

/// Writes the completion script for `shell` to `out`.
pub(crate) fn write(shell: CompletionShell, out: &mut dyn Write) {
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    clap_complete::generate(shell, &mut Cli::command(), "warrant", out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(shell: CompletionShell) -> String {
        let mut out = Vec::new();
        write(shell, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn bash_completes_commands_and_their_flags() {
        let bash = script(CompletionShell::Bash);
        assert!(bash.contains("serve"), "{bash}");
        assert!(bash.contains("--service-account-issuer"), "{bash}");
        assert!(bash.contains("--tls-min-version"), "{bash}");
        assert!(bash.contains("complete -F"), "{bash}");
    }

    #[test]
    fn zsh_and_fish_too() {
        let zsh = script(CompletionShell::Zsh);
        assert!(zsh.starts_with("#compdef warrant"), "{zsh}");
        assert!(zsh.contains("--service-account-issuer"));
        let fish = script(CompletionShell::Fish);
        assert!(fish.contains("complete -c warrant"), "{fish}");
        assert!(fish.contains("service-account-issuer"));
    }
}
