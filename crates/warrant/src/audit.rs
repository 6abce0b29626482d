//! `warrant serve`'s audit flags, with kube-apiserver's names and meanings (docs/audit.md).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use warrant_audit::{AuditOptions, Destination, Mode, Rotation, Schema};

/// The audit log.
#[derive(Debug, Clone, Args)]
pub(crate) struct AuditArgs {
    /// Write an audit event (a JSON line) for every TokenRequest, TokenReview and Sign to this
    /// file; `-` writes them to standard output. Default: no audit log. docs/audit.md.
    #[arg(long = "audit-log-path", value_name = "PATH", help_heading = "Audit")]
    pub(crate) path: Option<PathBuf>,
    /// Rotate the file before it grows past this many megabytes (0: never).
    #[arg(
        long = "audit-log-maxsize",
        value_name = "MB",
        default_value_t = 100,
        requires = "path",
        help_heading = "Audit"
    )]
    pub(crate) max_size_mb: u64,
    /// Keep this many rotated files, the newest (0: all). kube-apiserver's default is 0.
    #[arg(
        long = "audit-log-maxbackup",
        value_name = "COUNT",
        default_value_t = 10,
        requires = "path",
        help_heading = "Audit"
    )]
    pub(crate) max_backups: usize,
    /// Remove rotated files older than this many days (0: whatever their age).
    #[arg(
        long = "audit-log-maxage",
        value_name = "DAYS",
        default_value_t = 0,
        requires = "path",
        help_heading = "Audit"
    )]
    pub(crate) max_age_days: u32,
    /// What a request does when --audit-log-batch-buffer-size events are already waiting
    /// for the disk: wait (blocking: no event is lost) or go on without its event, which is
    /// counted in warrant_audit_events_total{result="dropped"} (batch).
    #[arg(
        long = "audit-log-mode",
        value_enum,
        value_name = "MODE",
        default_value_t = AuditMode::Blocking,
        requires = "path",
        help_heading = "Audit"
    )]
    pub(crate) mode: AuditMode,
    /// How many events may wait for the disk.
    #[arg(
        long = "audit-log-batch-buffer-size",
        value_name = "EVENTS",
        default_value_t = 10_000,
        value_parser = clap::value_parser!(u32).range(1..),
        requires = "path",
        help_heading = "Audit"
    )]
    pub(crate) buffer_size: u32,
    /// What each line is: warrant's own event, or kube-apiserver's audit.k8s.io/v1 Event
    /// (level Metadata, warrant's facts in warrant.dev/ annotations) for pipelines built for
    /// kube-apiserver's audit log. Not kube's --audit-log-format, which is json|legacy.
    #[arg(
        long = "audit-log-schema",
        value_enum,
        value_name = "SCHEMA",
        default_value_t = AuditSchema::Warrant,
        requires = "path",
        help_heading = "Audit"
    )]
    pub(crate) schema: AuditSchema,
}

/// `--audit-log-schema`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AuditSchema {
    /// warrant's event (docs/audit.md, "The event").
    Warrant,
    /// kube-apiserver's audit.k8s.io/v1 Event.
    Kubernetes,
}

/// `--audit-log-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AuditMode {
    /// Requests wait for room in the queue: no event is lost.
    Blocking,
    /// Requests never wait: an event that finds the queue full is dropped and counted.
    Batch,
}

impl AuditArgs {
    /// The writer's options; `None` without --audit-log-path.
    pub(crate) fn options(&self) -> Option<AuditOptions> {
        let path = self.path.as_ref()?;
        let destination = if path.as_os_str() == "-" {
            Destination::Stdout
        } else {
            Destination::File(
                path.clone(),
                Rotation {
                    max_size_bytes: self.max_size_mb.saturating_mul(1024 * 1024),
                    max_backups: self.max_backups,
                    max_age_days: self.max_age_days,
                },
            )
        };
        Some(AuditOptions {
            destination,
            mode: match self.mode {
                AuditMode::Blocking => Mode::Blocking,
                AuditMode::Batch => Mode::Batch,
            },
            buffer_size: self.buffer_size as usize,
            schema: match self.schema {
                AuditSchema::Warrant => Schema::Warrant,
                AuditSchema::Kubernetes => Schema::Kubernetes,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::cli::{Cli, Command};

    use super::*;

    fn serve(args: &[&str]) -> Result<Option<AuditOptions>, clap::Error> {
        let mut argv = vec!["warrant", "serve"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv)?;
        let Command::Serve(serve) = cli.command else {
            panic!("not serve");
        };
        Ok(serve.audit.options())
    }

    /// kube-apiserver's flags mean what they mean there: megabytes, a count, days.
    #[test]
    fn flags_read_as_kube_apiserver_reads_them() {
        assert_eq!(serve(&[]).unwrap(), None);
        let options = serve(&[
            "--audit-log-path",
            "/var/log/warrant/audit.log",
            "--audit-log-maxsize",
            "5",
            "--audit-log-maxbackup",
            "3",
            "--audit-log-maxage",
            "7",
            "--audit-log-mode",
            "batch",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            options,
            AuditOptions {
                destination: Destination::File(
                    "/var/log/warrant/audit.log".into(),
                    Rotation {
                        max_size_bytes: 5 * 1024 * 1024,
                        max_backups: 3,
                        max_age_days: 7,
                    }
                ),
                mode: Mode::Batch,
                buffer_size: 10_000,
                schema: Schema::Warrant,
            }
        );
        let stdout = serve(&["--audit-log-path", "-"]).unwrap().unwrap();
        assert_eq!(stdout.destination, Destination::Stdout);
        assert_eq!(stdout.mode, Mode::Blocking);
    }

    /// warrant's schema unless kube's is asked for; a schema without a path is an error, as
    /// the other audit flags are.
    #[test]
    fn the_schema_is_warrants_unless_asked() {
        let kube = serve(&["--audit-log-path", "-", "--audit-log-schema", "kubernetes"])
            .unwrap()
            .unwrap();
        assert_eq!(kube.schema, Schema::Kubernetes);
        let err = serve(&["--audit-log-schema", "kubernetes"]).unwrap_err();
        assert!(err.to_string().contains("--audit-log-path"), "{err}");
        let err = serve(&["--audit-log-path", "-", "--audit-log-schema", "json"]).unwrap_err();
        assert!(err.to_string().contains("kubernetes"), "{err}");
    }

    /// A rotation flag without a path configures nothing, and says so.
    #[test]
    fn rotation_without_a_path_is_an_error() {
        let err = serve(&["--audit-log-maxsize", "5"]).unwrap_err();
        assert!(err.to_string().contains("--audit-log-path"), "{err}");
        let err = serve(&[
            "--audit-log-path",
            "a.log",
            "--audit-log-batch-buffer-size",
            "0",
        ])
        .unwrap_err();
        assert!(err.to_string().contains("0"), "{err}");
    }
}
