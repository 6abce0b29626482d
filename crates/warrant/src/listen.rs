//! The listening socket `serve` accepts on: the one a service manager passes (socket
//! activation: systemd's `LISTEN_FDS`, which `systemfd` and tests use too), or else one bound
//! from `--bind-address` and `--secure-port`.
//!
//! A passed socket is already bound and listening before warrant starts, so a port is never
//! free between two runs: a restart under systemd loses no connection attempts (they wait in
//! the socket's backlog), and the end-to-end tests know the port, which the issuer URL
//! contains, without the race of picking a free one and hoping it stays free.

use std::net::TcpListener;

/// The socket passed by the service manager, if any. Reads and clears `LISTEN_FDS`,
/// `LISTEN_PID` and `LISTEN_FDS_FIRST_FD`, so it must run before any other thread starts (the
/// first thing `main` does): the environment is not safe to change once threads read it.
pub(crate) fn inherited() -> Result<Option<TcpListener>, ListenError> {
    let mut fds = listenfd::ListenFd::from_env();
    match fds.len() {
        0 => Ok(None),
        1 => match fds.take_tcp_listener(0) {
            Ok(Some(listener)) => Ok(Some(listener)),
            Ok(None) => Err(ListenError::Taken),
            Err(cause) => Err(ListenError::NotTcp(cause)),
        },
        n => Err(ListenError::NotOne(n)),
    }
}

/// Why the socket a service manager passes cannot be served on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenError {
    /// The descriptor was taken already (cannot happen when `inherited` runs once).
    #[error("the socket passed in LISTEN_FDS was already taken")]
    Taken,
    /// The descriptor is not a listening TCP socket (a Unix socket, a UDP one, a file).
    #[error("the socket passed in LISTEN_FDS is not a listening TCP socket")]
    NotTcp(#[source] std::io::Error),
    /// More than one socket passed.
    #[error("LISTEN_FDS passes {0} sockets; warrant serves on exactly one")]
    NotOne(usize),
}
