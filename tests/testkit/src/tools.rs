//! The programs tests call that are not Rust crates: SoftHSM2 and OpenSC's `pkcs11-tool`, the
//! `openssl` command, moto's and Azurite's servers, Python with PyJWT, `cryptography` and
//! Microsoft's SDK. A test asks for its tool here before it uses it; a missing one fails the test
//! with one line naming the tool and the command that installs it, taken from
//! `scripts/test-tools`, the one list `make test` installs from. Never a panic deep in a fixture
//! ("No such file or directory", a Python traceback) that leaves the reader to guess.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// scripts/test-tools, from this crate's directory (tests/testkit).
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-tools")
}

/// The one command that installs `tool`, as scripts/test-tools says.
fn install_command(tool: &str) -> String {
    Command::new(script())
        .args(["how", tool])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "scripts/test-tools install".to_owned())
}

/// Fails the calling test with the one line that says what is missing and how to install it.
#[track_caller]
fn missing(what: &str, tool: &str) -> ! {
    panic!(
        "{what} is not installed: run `{}` (or `make test-tools` for every tool the tests call)",
        install_command(tool)
    )
}

/// Whether `program` is an executable file in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            std::fs::metadata(dir.join(program)).is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
    })
}

/// A command for `program` (a name looked up in `PATH`, as `Command` does), after checking it
/// is there: `what` names it for the reader (e.g. "moto's S3 server (moto_server)").
#[track_caller]
pub fn command(program: &str, what: &str) -> Command {
    if !on_path(program) {
        missing(what, program);
    }
    Command::new(program)
}

/// Checks that the file `path` a tool installs exists (a PKCS#11 module, say); `tool` is the
/// program or package scripts/test-tools knows it by.
#[track_caller]
pub fn require_file(path: &Path, what: &str, tool: &str) {
    if !path.exists() {
        missing(&format!("{what} ({})", path.display()), tool);
    }
}

/// `python3`, after checking it imports each of `modules` (e.g. `["jwt", "cryptography"]`);
/// each module is checked once per test process.
#[track_caller]
pub fn python(modules: &[&str]) -> Command {
    static IMPORTED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let imported = IMPORTED.get_or_init(Mutex::default);
    let mut seen = imported.lock().unwrap_or_else(|e| e.into_inner());
    if !on_path("python3") {
        missing("python3", "python3");
    }
    for module in modules {
        if seen.contains(*module) {
            continue;
        }
        let ok = Command::new("python3")
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|out| out.status.success());
        if !ok {
            missing(&format!("Python's `{module}` module"), module);
        }
        seen.insert((*module).to_owned());
    }
    Command::new("python3")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_named_with_its_install_command() {
        let panic = std::panic::catch_unwind(|| command("moto_server-not-here", "a tool"))
            .expect_err("a program that is not on PATH fails the test");
        let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.starts_with("a tool is not installed: run `"),
            "{message}"
        );
        assert!(!message.contains('\n'), "one line: {message}");
    }

    #[test]
    fn the_install_command_comes_from_the_script() {
        assert!(
            install_command("moto_server").starts_with("python3 -m pip install 'moto[server]=="),
            "{}",
            install_command("moto_server")
        );
        assert!(install_command("pkcs11-tool").ends_with("apt-get install -y opensc"));
    }

    #[test]
    fn a_present_program_is_found() {
        assert!(on_path("sh"));
        assert!(!on_path("no-such-program-anywhere"));
    }
}
