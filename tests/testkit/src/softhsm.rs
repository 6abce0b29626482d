//! A SoftHSM2 of its own for one test or benchmark: a directory holding its token directory
//! (`tokens/`) and configuration (`softhsm2.conf`), tokens initialized with `softhsm2-util`,
//! and PIN files warrant accepts. SoftHSM2 reads `SOFTHSM2_CONF` once, when its module is
//! initialized: a process that loads the module itself (warrant-hsm's tests and benchmark) runs
//! with [`SoftHsm2::env`] set from its start (it re-runs itself); warrant's binary and the
//! tools get it in their environment ([`SoftHsm2::command`]).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tools;

/// The user PIN of every token made here.
pub const PIN: &str = "1234";
/// The security officer's PIN of every token made here.
pub const SO_PIN: &str = "5678";

/// SoftHSM2's PKCS#11 module: `WARRANT_HSM_MODULE`, or where Debian's and Ubuntu's `softhsm2`
/// package installs it.
pub fn module() -> PathBuf {
    std::env::var_os("WARRANT_HSM_MODULE").map_or_else(
        || PathBuf::from("/usr/lib/softhsm/libsofthsm2.so"),
        PathBuf::from,
    )
}

/// One SoftHSM2: the directory that holds its configuration and tokens, and the module that
/// reads them.
#[derive(Debug, Clone)]
pub struct SoftHsm2 {
    dir: PathBuf,
    module: PathBuf,
}

impl SoftHsm2 {
    /// Makes a SoftHSM2 in `dir` (an empty token directory and a configuration) for
    /// [`module()`], after checking that it and `softhsm2-util` are installed.
    #[track_caller]
    pub fn create(dir: &Path) -> SoftHsm2 {
        SoftHsm2::create_for(dir, &module())
    }

    /// [`create`](Self::create) for the SoftHSM2 module at `module`.
    #[track_caller]
    pub fn create_for(dir: &Path, module: &Path) -> SoftHsm2 {
        tools::require_file(module, "SoftHSM2's PKCS#11 module", "softhsm2");
        tools::command("softhsm2-util", "SoftHSM2 (softhsm2-util)");
        let softhsm = SoftHsm2 {
            dir: dir.to_owned(),
            module: module.to_owned(),
        };
        std::fs::create_dir_all(softhsm.tokens()).expect("the token directory");
        // Tokens stay in their slots when their files go (a test of a token that disappears
        // moves them aside), so that the slot list does not shift under a running warrant.
        std::fs::write(
            softhsm.conf(),
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n",
                softhsm.tokens().display()
            ),
        )
        .expect("softhsm2.conf");
        softhsm
    }

    /// The SoftHSM2 [`create`](Self::create) made in `dir` (in the process it re-ran).
    pub fn at(dir: &Path) -> SoftHsm2 {
        SoftHsm2 {
            dir: dir.to_owned(),
            module: module(),
        }
    }

    /// The directory holding it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its configuration file.
    pub fn conf(&self) -> PathBuf {
        self.dir.join("softhsm2.conf")
    }

    /// Its token directory: one directory in it for each token.
    pub fn tokens(&self) -> PathBuf {
        self.dir.join("tokens")
    }

    /// The environment that makes the module use this SoftHSM2.
    pub fn env(&self) -> [(&'static str, PathBuf); 1] {
        [("SOFTHSM2_CONF", self.conf())]
    }

    /// `program` with [`env`](Self::env) set.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(program);
        command.envs(self.env());
        command
    }

    /// Initializes a token labelled `label` with the user PIN [`PIN`]; returns its directory
    /// (the token's files, which a test may move aside).
    #[track_caller]
    pub fn init_token(&self, label: &str) -> PathBuf {
        let before = self.token_dirs();
        let out = self
            .command("softhsm2-util")
            .args(["--init-token", "--free", "--label", label])
            .args(["--pin", PIN, "--so-pin", SO_PIN])
            .output()
            .expect("softhsm2-util runs");
        assert!(
            out.status.success(),
            "softhsm2-util --init-token: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.token_dirs()
            .into_iter()
            .find(|d| !before.contains(d))
            .expect("softhsm2-util made the token's directory")
    }

    fn token_dirs(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.tokens())
            .expect("the token directory")
            .map(|e| e.expect("a token's directory").path())
            .collect()
    }

    /// A file `name` in the directory holding `pin`, readable by this user only (warrant
    /// refuses a PIN file every user can read).
    #[track_caller]
    pub fn pin_file(&self, name: &str, pin: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, format!("{pin}\n")).expect("the PIN file");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("the PIN file's mode");
        path
    }

    /// OpenSC's `pkcs11-tool` on token `label`, logged in with [`PIN`] or (`login` false) not:
    /// what anyone who can reach the token, but has no PIN, can do.
    #[track_caller]
    pub fn pkcs11_tool(&self, label: &str, login: bool) -> Command {
        tools::command("pkcs11-tool", "OpenSC's pkcs11-tool");
        let mut command = self.command("pkcs11-tool");
        command
            .arg("--module")
            .arg(&self.module)
            .args(["--token-label", label]);
        if login {
            command.args(["--login", "--pin", PIN]);
        }
        command
    }

    /// `--key-pkcs11-uri` for token `label`: the module, and the PIN from `pin_file`.
    pub fn uri(&self, label: &str, pin_file: &Path) -> String {
        format!(
            "pkcs11:token={label}?module-path={}&pin-source=file:{}",
            self.module.display(),
            pin_file.display()
        )
    }
}
