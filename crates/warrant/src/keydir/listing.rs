//! What `warrant keys list` (and the other commands, after their change) print of a key set:
//! the schedule as a table, or JSON, with what the store's status adds beside it.

use std::error::Error;
use std::io::Write;

use jiff::Timestamp;
use serde_json::json;
use warrant_keys::{KeyPurpose, KeySchedule, ManagedKeySet, RotationPolicy};

use crate::cli::ListFormat;

fn time(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "-".to_owned(), |t| t.to_string())
}

/// Prints a key set's schedule at `now`: a table, or JSON. With a policy, the planned
/// successor's times are shown for the last key (`~`: planned, not yet in the store).
pub(super) fn print(
    format: ListFormat,
    keys: &ManagedKeySet,
    policy: Option<&RotationPolicy>,
    now: Timestamp,
) -> Result<(), Box<dyn Error>> {
    print_about(format, keys, policy, now, None)
}

/// As [`print`], with what `about` says of the store beside the keys (its writer, this node's
/// copy): its lines after the table, or its members in the JSON document.
pub(super) fn print_about(
    format: ListFormat,
    keys: &ManagedKeySet,
    policy: Option<&RotationPolicy>,
    now: Timestamp,
    about: Option<&super::about::About>,
) -> Result<(), Box<dyn Error>> {
    let listing = Listing {
        keys,
        schedule: keys.schedule(now),
        successor: policy.and_then(|p| keys.successor(p, now)),
        next_change: policy.and_then(|p| keys.next_change(now, p)),
        now,
        about,
    };
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => listing.json(&mut out),
        ListFormat::Text => listing.text(&mut out),
    }
}

/// What `keys list` (and the other commands, after their change) print of a key set at `now`.
struct Listing<'a> {
    keys: &'a ManagedKeySet,
    schedule: Vec<KeySchedule>,
    /// The planned successor, with a policy.
    successor: Option<warrant_keys::Successor>,
    next_change: Option<Timestamp>,
    now: Timestamp,
    about: Option<&'a super::about::About>,
}

impl Listing<'_> {
    /// The JSON document.
    fn json(&self, out: &mut impl Write) -> Result<(), Box<dyn Error>> {
        let Listing {
            keys,
            schedule,
            successor,
            next_change,
            now,
            about,
        } = self;
        let (successor, next_change, now) = (*successor, *next_change, *now);
        let entry = |k: &KeySchedule| {
            json!({
                "kid": k.kid,
                "algorithm": k.algorithm.name(),
                "state": k.state.name(),
                "publishedAt": k.published_at.to_string(),
                "activateAt": k.activate_at.to_string(),
                "retireAt": k.retire_at.map(|t| t.to_string()),
                "removeAt": k.remove_at.map(|t| t.to_string()),
                "maxTokenSeconds": k.max_token_seconds,
            })
        };
        let mut document = json!({
            "now": now.to_string(),
            "purpose": keys.purpose().name(),
            "keys": schedule.iter().map(entry).collect::<Vec<_>>(),
            "successor": successor.map(|s| json!({
                "createAt": s.create_at.to_string(),
                "activateAt": s.activate_at.to_string(),
                "predecessorRemovedAt": s.predecessor_removed_at.map(|t| t.to_string()),
            })),
            "nextChange": next_change.map(|t| t.to_string()),
            "signingStoppedAt": keys.stopped_at(now).map(|t| t.to_string()),
            "revoked": keys.revocations().iter().map(|r| json!({
                "kid": r.kid,
                "revokedAt": r.revoked_at.to_string(),
                "forgetAt": r.forget_at.to_string(),
            })).collect::<Vec<_>>(),
        });
        if let (Some(about), Some(object)) = (about, document.as_object_mut()) {
            object.extend(about.json(now));
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&document)?)?;
        Ok(())
    }

    /// The table, then what it does not show.
    fn text(&self, out: &mut impl Write) -> Result<(), Box<dyn Error>> {
        let Listing {
            keys,
            schedule,
            successor,
            now,
            about,
            ..
        } = self;
        let (successor, now) = (*successor, *now);
        writeln!(
            out,
            "{:<44}  {:<5}  {:<7}  {:<20}  {:<20}  {:<21}  {:<21}",
            "KID", "ALG", "STATE", "PUBLISHED", "ACTIVATES", "RETIRES", "REMOVED"
        )?;
        let last = schedule.len().saturating_sub(1);
        for (i, k) in schedule.iter().enumerate() {
            let (retires, removed) = match (k.retire_at, successor) {
                (None, Some(s)) if i == last => (
                    format!("~{}", s.activate_at),
                    format!("~{}", time(s.predecessor_removed_at)),
                ),
                _ => (time(k.retire_at), time(k.remove_at)),
            };
            writeln!(
                out,
                "{:<44}  {:<5}  {:<7}  {:<20}  {:<20}  {:<21}  {:<21}",
                k.kid,
                k.algorithm.name(),
                k.state.name(),
                k.published_at,
                k.activate_at,
                retires,
                removed
            )?;
        }
        if keys.purpose() != KeyPurpose::Tokens {
            writeln!(
                out,
                "\npurpose: {} ({})",
                keys.purpose().keys(),
                keys.purpose()
            )?;
        }
        if let Some(s) = successor {
            writeln!(
                out,
                "\n~ planned: the next key is created at {} and signs from {}.",
                s.create_at.max(now),
                s.activate_at
            )?;
        }
        if let Some(since) = keys.stopped_at(now) {
            writeln!(
                out,
                "\nNO KEY SIGNS since {since}: the signing key was revoked and no key could be made to take over yet; the store's writer makes one as soon as the key holder answers."
            )?;
        }
        for r in keys.revocations() {
            writeln!(
                out,
                "\nREVOKED {} at {}: its tokens are refused (the last of them expires at {} at the latest); the kid is remembered for good, so no key file can bring it back.",
                r.kid, r.revoked_at, r.forget_at
            )?;
        }
        if let Some(about) = about {
            writeln!(out)?;
            for line in about.lines(now) {
                writeln!(out, "{line}")?;
            }
        }
        Ok(())
    }
}
