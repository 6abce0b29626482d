//! Loaded PKCS#11 modules, one per path per process.
//!
//! A module may be initialized (`C_Initialize`) once per process, and every token handle that
//! uses it shares that initialization, so modules are kept in a process-wide table and never
//! unloaded. Some modules (SoftHSM2 among them) only see tokens that existed at `C_Initialize`:
//! when a token disappears and comes back, the only way to reach it again without a restart is
//! to finalize and initialize the module again. That invalidates every session of every handle
//! on the module, so it is guarded: PKCS#11 calls hold the module's lock shared, a
//! re-initialization holds it exclusively, and each session remembers the generation it was
//! opened in. A session of an older generation is never used or closed (its handle number may
//! now belong to a new session); its owner reopens instead.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, RwLockReadGuard};

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};

use crate::error::{HsmError, ckr_name};

/// A loaded, initialized module.
#[derive(Debug)]
pub(crate) struct Module {
    path: PathBuf,
    ctx: Pkcs11,
    /// The initialization generation. Read-locked around every call, write-locked to
    /// re-initialize.
    generation: RwLock<u64>,
}

static MODULES: OnceLock<Mutex<HashMap<PathBuf, Arc<Module>>>> = OnceLock::new();

impl Module {
    /// The module at `path`, loaded and initialized once per process.
    pub(crate) fn load(path: &Path) -> Result<Arc<Module>, HsmError> {
        let key = std::fs::canonicalize(path).map_err(|_| HsmError::ModuleNotFound {
            path: path.to_path_buf(),
        })?;
        refuse_if_others_can_change(path, &key)?;
        let table = MODULES.get_or_init(Mutex::default);
        let mut table = table.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(module) = table.get(&key) {
            return Ok(module.clone());
        }
        let ctx = Pkcs11::new(&key).map_err(|cause| HsmError::NotAModule {
            path: path.to_path_buf(),
            cause,
        })?;
        initialize(&ctx, path)?;
        let module = Arc::new(Module {
            path: path.to_path_buf(),
            ctx,
            generation: RwLock::new(0),
        });
        table.insert(key, module.clone());
        Ok(module)
    }

    /// The module's path, as configured.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Holds the module initialized for the duration of a call.
    pub(crate) fn enter(&self) -> Entered<'_> {
        Entered {
            generation: self
                .generation
                .read()
                .unwrap_or_else(PoisonError::into_inner),
            ctx: &self.ctx,
        }
    }

    /// Finalizes and initializes the module again, unless someone already did since `seen`.
    pub(crate) fn reinitialize(&self, seen: u64) -> Result<(), HsmError> {
        let mut generation = self
            .generation
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if *generation != seen {
            return Ok(());
        }
        tracing::warn!(module = %self.path.display(), "re-initializing the PKCS#11 module to find its tokens again");
        // Whatever C_Finalize says, the sessions are gone; initialize again regardless.
        let _ = self.ctx.clone().finalize();
        *generation += 1;
        initialize(&self.ctx, &self.path)
    }
}

/// Refuses a module that someone other than its owner could replace: the module file, or a
/// directory above it, writable by group or others, or owned by anyone but root or this
/// process's user. Loading a module runs its code inside warrant, which then logs in with the
/// PIN, so this is ssh-agent's rule for PKCS#11 providers (it keeps an allow-list of paths and
/// refuses others). A world-writable directory with the sticky bit owned by root (`/tmp`) is
/// allowed: others cannot rename or remove what they do not own in it. `canonical` is `path`
/// with its symbolic links resolved, so the files checked are the ones loaded.
fn refuse_if_others_can_change(path: &Path, canonical: &Path) -> Result<(), HsmError> {
    use std::os::unix::fs::MetadataExt as _;
    let me = rustix::process::geteuid().as_raw();
    for culprit in canonical.ancestors() {
        let Ok(meta) = std::fs::metadata(culprit) else {
            continue;
        };
        let unsafe_because = |problem: String| HsmError::ModuleUnsafe {
            path: path.to_path_buf(),
            culprit: culprit.to_path_buf(),
            problem,
        };
        let mode = meta.mode();
        let sticky_root_dir = meta.is_dir() && mode & 0o1000 != 0 && meta.uid() == 0;
        if mode & 0o022 != 0 && !sticky_root_dir {
            let who = if mode & 0o002 != 0 {
                "every user"
            } else {
                "its group"
            };
            return Err(unsafe_because(format!(
                "is writable by {who} (mode {:o})",
                mode & 0o7777
            )));
        }
        if meta.uid() != 0 && meta.uid() != me {
            return Err(unsafe_because(format!(
                "is owned by user {}, neither root nor warrant's user ({me})",
                meta.uid()
            )));
        }
    }
    Ok(())
}

fn initialize(ctx: &Pkcs11, path: &Path) -> Result<(), HsmError> {
    match ctx.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        // Something else in this process initialized it already: share that.
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => Ok(()),
        Err(cause) => Err(HsmError::ModuleInit {
            path: path.to_path_buf(),
            code: ckr_name(&cause),
            cause,
        }),
    }
}

/// The module, held initialized (shared) while this lives.
pub(crate) struct Entered<'a> {
    generation: RwLockReadGuard<'a, u64>,
    ctx: &'a Pkcs11,
}

impl Entered<'_> {
    pub(crate) fn generation(&self) -> u64 {
        *self.generation
    }

    pub(crate) fn ctx(&self) -> &Pkcs11 {
        self.ctx
    }
}
