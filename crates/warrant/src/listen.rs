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
pub(crate) fn inherited() -> Result<Option<TcpListener>, String> {
    let mut fds = listenfd::ListenFd::from_env();
    match fds.len() {
        0 => Ok(None),
        1 => match fds.take_tcp_listener(0) {
            Ok(Some(listener)) => Ok(Some(listener)),
            Ok(None) => Err("the socket passed in LISTEN_FDS was already taken".to_owned()),
            Err(e) => Err(format!(
                "the socket passed in LISTEN_FDS is not a listening TCP socket: {e}"
            )),
        },
        n => Err(format!(
            "LISTEN_FDS passes {n} sockets; warrant serves on exactly one"
        )),
    }
}
