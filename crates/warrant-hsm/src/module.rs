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
