//! Replacing a file so that a reader never sees it half written or empty, through no symbolic
//! link: the credential plugin's cache and the token agent write this way. The one
//! implementation is [`warrant_watch::private_file`], which the audit log, the key directory and
//! `local-setup` share; these names keep the callers' paths (`crate::atomic::…`) as they were.

pub(crate) use warrant_watch::private_file::{inside, replace};
