//! The process at the other end of a signing-socket connection, as the kernel names it, and
//! which processes may hold one: what the connection layer checks and the service records.

/// The users and groups whose processes may use the socket.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerPolicy {
    /// Users allowed, whatever their group.
    pub uids: Vec<u32>,
    /// Primary groups allowed, whatever the user.
    pub gids: Vec<u32>,
}

impl PeerPolicy {
    /// The default for a socket owned by `owner` with `group` (`--signing-endpoint-group`): the
    /// owner, root, and that group; the same as the file mode lets in, less supplementary group
    /// members.
    pub fn for_socket(owner: u32, group: Option<u32>) -> Self {
        let mut uids = vec![owner];
        if owner != 0 {
            uids.push(0);
        }
        PeerPolicy {
            uids,
            gids: group.into_iter().collect(),
        }
    }

    /// Whether a process of user `uid` and primary group `gid` may use the socket.
    pub fn allows(&self, uid: u32, gid: u32) -> bool {
        self.uids.contains(&uid) || self.gids.contains(&gid)
    }
}

/// The process at the other end of a connection, as the kernel reported it when it connected.
/// In every call's request extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Its user.
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
    /// Its process ID, if it is in this process's PID namespace.
    pub pid: Option<i32>,
}
