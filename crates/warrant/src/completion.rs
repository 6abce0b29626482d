//! `warrant completion bash|zsh|fish`: the shell completion script, generated from the same
//! command line the binary parses, so it never lists a flag warrant does not have.

use std::io::{ErrorKind, Write};

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Cli, CompletionShell};

/// The completion script for `shell`.
fn script(shell: CompletionShell) -> Vec<u8> {
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    // Generated in memory: clap_complete panics if its writer fails.
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "warrant", &mut out);
    out
}

/// Writes the completion script for `shell` to `out`. A reader that stops early (`| head`)
/// is not an error: the rest is dropped quietly, as other command-line tools do.
pub(crate) fn write(shell: CompletionShell, out: &mut dyn Write) -> std::io::Result<()> {
    match out.write_all(&script(shell)).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(shell: CompletionShell) -> String {
        let mut out = Vec::new();
        write(shell, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A writer that takes `room` bytes, then fails as a closed pipe does.
    struct ClosedAfter(usize, ErrorKind);

    impl Write for ClosedAfter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(self.1.into());
            }
            let n = bytes.len().min(self.0);
            self.0 -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_reader_that_stops_early_is_not_an_error_but_a_full_disk_is() {
        write(
            CompletionShell::Fish,
            &mut ClosedAfter(10, ErrorKind::BrokenPipe),
        )
        .unwrap();
        write(
            CompletionShell::Bash,
            &mut ClosedAfter(0, ErrorKind::BrokenPipe),
        )
        .unwrap();
        let full = write(
            CompletionShell::Zsh,
            &mut ClosedAfter(10, ErrorKind::StorageFull),
        );
        assert_eq!(full.unwrap_err().kind(), ErrorKind::StorageFull);
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
