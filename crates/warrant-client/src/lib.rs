//! warrant's clients: the programs that ask warrant for tokens, as opposed to warrant itself.
//!
//! - [`credential`]: client-go's exec credential plugin (KEP-5339), run by kubectl or a hub's
//!   controllers from a kubeconfig's `exec` section as `warrant credential`, once per client
//!   that needs a token: it trades the workload's own token for a short-lived token for the
//!   cluster client-go is about to call, and prints it as an ExecCredential.
//! - [`agent`]: the token agent, run as `warrant token-agent` in a native sidecar that token
//!   injection adds to a pod (or by hand): it keeps tokens of the pod's service account,
//!   bound to the pod, in files the pod's containers read, for as long as the pod runs.
//!
//! Both make the same request (a TokenRequest to warrant, over https, with a token of their
//! own or a kubeconfig's credential; the `request` module), trust warrant by the same rules
//! ([`endpoint`]: https only, a CA bundle of the operator's) and renew tokens by the same
//! schedule (the `refresh` module). Each takes a typed configuration ([`credential::Config`],
//! [`agent::Config`]); the `warrant` binary builds them from its command line, and this crate
//! knows nothing of it. The contract between the agent and the webhook that writes its
//! container is [`warrant_proto::agent_contract`], in the crate of the wire types both sides
//! share; this crate does not depend on the server's.

pub mod agent;
pub mod credential;
pub mod endpoint;
mod name;
mod refresh;
mod request;
mod text;

pub use name::{ObjectName, ObjectNameError, parse_object_name};
pub use text::causes;
