//! The lifecycle with the clock as a parameter: whole rotations stepped to the second around
//! every boundary, with tokens signed at each moment and verified at every later one.

use std::collections::BTreeSet;

use warrant_testkit::{ISSUER, SA_UID};
use warrant_token::{
    Binding, Claims, KeyError, KeyType, NewToken, ObjectRef, TokenError, Verifier,
};

use super::*;
use crate::test_support::*;
use crate::{KeySet, ListedKeys};

fn generate(key_type: KeyType) -> Result<SigningKey, KeyError> {
    SigningKey::generate(key_type)
}

fn rotated(set: &ManagedKeySet, policy: &RotationPolicy, now: i64) -> ManagedKeySet {
    set.rotate(policy, at(now), generate)
        .unwrap()
        .unwrap_or_else(|| set.clone())
}

fn states(set: &ManagedKeySet, now: i64) -> Vec<KeyState> {
    set.schedule(at(now)).iter().map(|k| k.state).collect()
}

fn token(key: &SigningKey, issued_at: i64, lifetime: i64) -> String {
    key.sign(&Claims::new(NewToken {
        issuer: ISSUER,
        namespace: "demo",
        service_account: ObjectRef::new("app", SA_UID),
        audiences: vec!["vault".into()],
        binding: Binding::None,
        issued_at,
        expires_at: issued_at + lifetime,
        warn_after: None,
        jti: format!("jti-{issued_at}-{lifetime}"),
    }))
    .unwrap()
}

fn verifier(keys: &KeySet) -> Verifier {
    Verifier::new(
        vec![ISSUER.into()],
        vec![ISSUER.into()],
        keys.verifying().to_vec(),
    )
}

fn verify(verifier: &Verifier, token: &str, now: i64) -> Result<(), TokenError> {
    verifier.verify(token, &["vault".into()], at(now)).map(drop)
}

/// The removal `keys list` plans for the last key before its successor exists is the one the
/// schedule gives once the successor is made on time.
#[test]
fn the_planned_removal_is_the_one_the_rotation_makes() {
    let p = policy();
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    let due = first.successor(&p, at(T0)).unwrap();
    let planned = due.predecessor_removed_at.unwrap();
    assert_eq!(planned, at(T0 + 7 * DAY + DAY + 60));
    let second = rotated(&first, &p, T0 + 6 * DAY);
    assert_eq!(
        second.schedule(at(T0 + 6 * DAY))[0].remove_at,
        Some(planned)
    );
    // The next successor follows the second key, which retires when it activates.
    let next = second.successor(&p, at(T0 + 6 * DAY)).unwrap();
    assert_eq!(next.activate_at, at(T0 + 14 * DAY));
    assert_eq!(
        next.predecessor_removed_at,
        Some(at(T0 + 14 * DAY + DAY + 60))
    );
}

#[test]
fn one_rotation_has_the_documented_times() {
    let p = policy();
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    assert_eq!(first.keys().len(), 1);
    let a = first.keys()[0].kid().to_owned();
    // The very first key signs at once: nothing was published before it.
    assert_eq!(states(&first, T0), [KeyState::Active]);
    assert_eq!(first.active_at(at(T0)).unwrap().kid(), a);
    let due = first.successor(&p, at(T0)).unwrap();
    assert_eq!(due.create_at, at(T0 + 6 * DAY));
    assert_eq!(due.activate_at, at(T0 + 7 * DAY));
    assert_eq!(first.next_change(at(T0), &p), Some(at(T0 + 6 * DAY)));

    // Nothing to do until the successor is due, to the second.
    assert!(
        first
            .rotate(&p, at(T0 + 6 * DAY - 1), generate)
            .unwrap()
            .is_none()
    );
    let second = first
        .rotate(&p, at(T0 + 6 * DAY), generate)
        .unwrap()
        .unwrap();
    let b = second.keys()[1].kid().to_owned();
    assert_eq!(second.keys()[1].published_at(), at(T0 + 6 * DAY));
    assert_eq!(second.keys()[1].activate_at(), at(T0 + 7 * DAY));
    assert_eq!(
        states(&second, T0 + 6 * DAY),
        [KeyState::Active, KeyState::Next]
    );
    assert_eq!(
        states(&second, T0 + 7 * DAY - 1),
        [KeyState::Active, KeyState::Next]
    );
    assert_eq!(
        states(&second, T0 + 7 * DAY),
        [KeyState::Retired, KeyState::Active]
    );
    // Removed once its longest token (a day) and the leeway (60 s) have passed.
    let removal = T0 + 7 * DAY + DAY + 60;
    assert_eq!(
        states(&second, removal - 1),
        [KeyState::Retired, KeyState::Active]
    );
    assert_eq!(
        states(&second, removal),
        [KeyState::Removed, KeyState::Active]
    );
    let schedule = second.schedule(at(T0));
    assert_eq!(schedule[0].retire_at, Some(at(T0 + 7 * DAY)));
    assert_eq!(schedule[0].remove_at, Some(at(removal)));
    assert_eq!(schedule[1].retire_at, None);
    assert_eq!(schedule[1].remove_at, None);
    assert_eq!(second.state_at(&a, at(removal)), Some(KeyState::Removed));
    assert_eq!(second.state_at(&b, at(removal)), Some(KeyState::Active));
    assert_eq!(second.state_at("nope", at(removal)), None);

    // The next changes, in order: activation, removal, then the following successor.
    assert_eq!(
        second.next_change(at(T0 + 6 * DAY), &p),
        Some(at(T0 + 7 * DAY))
    );
    assert_eq!(second.next_change(at(T0 + 7 * DAY), &p), Some(at(removal)));
    assert_eq!(second.next_change(at(removal), &p), Some(at(T0 + 13 * DAY)));

    // Rotation drops the removed key from the records at its removal time, not before.
    assert!(
        second
            .rotate(&p, at(removal - 1), generate)
            .unwrap()
            .is_none()
    );
    let third = second.rotate(&p, at(removal), generate).unwrap().unwrap();
    assert_eq!(third.keys().len(), 1);
    assert_eq!(third.keys()[0].kid(), b);

    // Published keys: active first, then next, then retired.
    let keys = second.key_set_at(at(T0 + 6 * DAY), &p).unwrap();
    let kids: Vec<&str> = keys.verifying().iter().map(|k| k.kid()).collect();
    assert_eq!(kids, [a.as_str(), b.as_str()]);
    let keys = second.key_set_at(at(T0 + 7 * DAY), &p).unwrap();
    let kids: Vec<&str> = keys.verifying().iter().map(|k| k.kid()).collect();
    assert_eq!(kids, [b.as_str(), a.as_str()]);
    let keys = second.key_set_at(at(removal), &p).unwrap();
    let kids: Vec<&str> = keys.verifying().iter().map(|k| k.kid()).collect();
    assert_eq!(kids, [b.as_str()]);
}

/// The times the test looks at: every hour, and every second from 3 s before to 3 s after each
/// time anything changes.
fn grid(start: i64, end: i64, boundaries: &BTreeSet<i64>) -> Vec<i64> {
    let mut times: BTreeSet<i64> = (start..=end).step_by(HOUR as usize).collect();
    for b in boundaries {
        for t in b - 3..=b + 3 {
            if (start..=end).contains(&t) {
                times.insert(t);
            }
        }
    }
    times.into_iter().collect()
}

/// A leader that wakes at every scheduled change, as the key manager does, and the records as
/// they are at each moment.
struct Simulation {
    policy: RotationPolicy,
    set: ManagedKeySet,
    clock: i64,
    boundaries: BTreeSet<i64>,
}

impl Simulation {
    fn new(policy: RotationPolicy, start: i64) -> Self {
        let set = rotated(&ManagedKeySet::default(), &policy, start);
        Simulation {
            policy,
            set,
            clock: start,
            boundaries: BTreeSet::from([start]),
        }
    }

    /// Runs every wake-up up to and including `t`.
    fn advance_to(&mut self, t: i64) {
        while let Some(wake) = self.set.next_change(at(self.clock), &self.policy) {
            let wake = wake.as_second();
            if wake > t {
                break;
            }
            assert!(wake >= self.clock, "time went backwards");
            self.set = rotated(&self.set, &self.policy, wake);
            assert!(
                self.set.next_change(at(wake), &self.policy).unwrap() > at(wake),
                "a rotation left work undone at {wake}"
            );
            self.boundaries.insert(wake);
            for key in self.set.schedule(at(wake)) {
                self.boundaries.insert(key.activate_at.as_second());
                if let Some(r) = key.remove_at {
                    self.boundaries.insert(r.as_second());
                }
            }
            self.clock = wake;
        }
        self.clock = self.clock.max(t);
    }
}

/// Documents' max-age as the server computes it (see warrant-server's `published.rs`).
fn max_age(keys: &KeySet, now: i64) -> i64 {
    keys.next_change()
        .map_or(3600, |t| (t.as_second() - now).clamp(60, 3600))
}

#[test]
fn a_full_rotation_cycle_never_fails_a_token() {
    full_cycle(policy(), 3);
}

#[test]
fn a_cycle_with_long_tokens_keeps_several_retired_keys() {
    // Tokens outlive two rotation periods: several retired keys are published at once.
    let p = RotationPolicy {
        rotation_period_seconds: 2 * DAY,
        publish_ahead_seconds: 6 * HOUR,
        max_token_seconds: 5 * DAY,
        ..policy()
    };
    assert_eq!(p.most_published_keys(), 5);
    full_cycle(p, 6);
}

fn full_cycle(p: RotationPolicy, rotations: i64) {
    let end = T0 + rotations * p.rotation_period_seconds + p.max_token_seconds + DAY;
    // First pass: run the leader to learn every boundary; second: check at every moment.
    let mut leader = Simulation::new(p, T0);
    leader.advance_to(end);
    let boundaries = leader.boundaries.clone();
    let times = grid(T0, end, &boundaries);

    let mut sim = Simulation::new(p, T0);
    let bootstrap = sim.set.keys()[0].kid().to_owned();
    // (token, signed at, expires at, kid)
    let mut tokens: Vec<(String, i64, i64, String)> = Vec::new();
    // (fetched at, cached until, published kids): what a relying party honouring max-age holds.
    let mut caches: Vec<(i64, i64, Vec<String>)> = Vec::new();
    let mut activations = BTreeSet::new();
    for &t in &times {
        sim.advance_to(t);
        let set = &sim.set;
        let keys = set.key_set_at(at(t), &p).expect("a key is always active");

        // Exactly one active key, and it is the one that signs.
        let schedule = set.schedule(at(t));
        let active: Vec<&KeySchedule> = schedule
            .iter()
            .filter(|k| k.state == KeyState::Active)
            .collect();
        assert_eq!(active.len(), 1, "at {t}: {schedule:?}");
        let signer = keys.signing_at(at(t)).unwrap();
        assert_eq!(signer.kid(), active[0].kid);
        activations.insert(signer.kid().to_owned());

        // It never signs before it has been published for publish-ahead (the first key of a
        // new set excepted), and a relying party's cached JWKS already has it.
        if signer.kid() != bootstrap {
            let published = active[0].published_at.as_second();
            assert!(
                t >= published + p.publish_ahead_seconds,
                "at {t}: {} signs {}s after it was published",
                signer.kid(),
                t - published
            );
        }
        for (fetched, until, kids) in &caches {
            if *until > t {
                assert!(
                    kids.iter().any(|k| k == signer.kid()),
                    "at {t}: a JWKS fetched at {fetched} (cacheable until {until}) lacks the signing key"
                );
            }
        }

        // Every token issued so far verifies until its own expiry (with leeway).
        let verifier = verifier(&keys);
        for (token, signed, exp, kid) in &tokens {
            if t <= exp + 60 {
                assert_eq!(
                    verify(&verifier, token, t),
                    Ok(()),
                    "at {t}: token signed at {signed} by {kid} (exp {exp})"
                );
            }
        }

        // Removed keys are gone from the JWKS, and only once their tokens have expired.
        for (_, _, exp, kid) in &tokens {
            let published = keys.verifying().iter().any(|k| k.kid() == kid);
            if !published {
                assert!(
                    t > exp + 60,
                    "at {t}: {kid} removed before its token expired"
                );
            }
        }
        for key in &schedule {
            let listed = keys.verifying().iter().any(|k| k.kid() == key.kid);
            assert_eq!(listed, key.state != KeyState::Removed, "at {t}: {key:?}");
        }

        // Sign now: the longest token the policy allows, and a short one.
        for lifetime in [p.max_token_seconds, 600] {
            tokens.push((
                token(signer, t, lifetime),
                t,
                t + lifetime,
                signer.kid().to_owned(),
            ));
        }
        caches.push((
            t,
            t + max_age(&keys, t),
            keys.verifying()
                .iter()
                .map(|k| k.kid().to_owned())
                .collect(),
        ));
    }
    // The cycle really rotated: one key per period, plus the first.
    assert_eq!(
        activations.len() as i64,
        (end - T0) / p.rotation_period_seconds + 1,
        "{activations:?}"
    );
    // And old keys were removed from the records.
    assert!(sim.set.keys().len() as i64 <= p.most_published_keys());
}

#[test]
fn a_late_rotation_keeps_the_old_key_signing_until_the_new_one_is_safe() {
    let p = policy();
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    // The leader was down for three days past the successor's creation time.
    let late = T0 + 9 * DAY;
    let due = first.successor(&p, at(late)).unwrap();
    assert_eq!(due.create_at, at(T0 + 6 * DAY));
    assert_eq!(due.activate_at, at(late + DAY));
    // Overdue: the next change is due already.
    assert_eq!(first.next_change(at(late), &p), Some(at(T0 + 6 * DAY)));
    let second = rotated(&first, &p, late);
    assert_eq!(second.keys()[1].published_at(), at(late));
    assert_eq!(second.keys()[1].activate_at(), at(late + DAY));
    assert_eq!(
        states(&second, late + DAY - 1),
        [KeyState::Active, KeyState::Next]
    );
    assert_eq!(
        states(&second, late + DAY),
        [KeyState::Retired, KeyState::Active]
    );
    // The following rotation is counted from the late activation.
    assert_eq!(
        second.successor(&p, at(late)).unwrap().create_at,
        at(late + DAY + 6 * DAY)
    );
}

#[test]
fn a_set_of_only_next_keys_activates_its_first_at_once() {
    let p = policy();
    let key = SigningKey::generate(KeyType::P256).unwrap();
    let set = ManagedKeySet::new(vec![ManagedKey::new(key, at(T0), at(T0 + DAY), DAY)]).unwrap();
    assert!(set.key_set_at(at(T0), &p).is_none());
    assert!(set.active_at(at(T0)).is_none());
    let set = rotated(&set, &p, T0 + 10);
    assert_eq!(set.keys()[0].activate_at(), at(T0 + 10));
    assert!(set.key_set_at(at(T0 + 10), &p).is_some());
}

#[test]
fn an_operator_rotation_publishes_ahead_and_never_activates_early() {
    let p = policy();
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    let now = T0 + 2 * DAY;
    let second = first.rotate_early(&p, at(now), generate).unwrap().unwrap();
    assert_eq!(second.keys().len(), 2);
    assert_eq!(second.keys()[1].published_at(), at(now));
    assert_eq!(second.keys()[1].activate_at(), at(now + DAY));
    // Again: the next key already activates as early as it safely can.
    assert!(
        second
            .rotate_early(&p, at(now + 5), generate)
            .unwrap()
            .is_none()
    );

    // A successor created on schedule activates a day later than needed if the operator asks
    // early: it is brought forward, but never before publish-ahead has passed.
    let scheduled = rotated(&first, &p, T0 + 6 * DAY);
    assert_eq!(scheduled.keys()[1].activate_at(), at(T0 + 7 * DAY));
    assert!(
        scheduled
            .rotate_early(&p, at(T0 + 6 * DAY + HOUR), generate)
            .unwrap()
            .is_none(),
        "a key published on schedule activates as soon as it is safe already"
    );
    let moved = ManagedKeySet::new(vec![
        first.keys()[0].clone(),
        ManagedKey::new(
            SigningKey::generate(KeyType::P256).unwrap(),
            at(T0 + DAY),
            at(T0 + 7 * DAY),
            DAY,
        ),
    ])
    .unwrap()
    .rotate_early(&p, at(T0 + 3 * DAY), generate)
    .unwrap()
    .unwrap();
    assert_eq!(moved.keys()[1].activate_at(), at(T0 + 3 * DAY));
}

#[test]
fn a_longer_token_lifetime_is_recorded_on_keys_that_still_sign() {
    let p = policy();
    let set = rotated(
        &rotated(&ManagedKeySet::default(), &p, T0),
        &p,
        T0 + 6 * DAY,
    );
    let set = rotated(&set, &p, T0 + 7 * DAY);
    assert_eq!(
        states(&set, T0 + 7 * DAY),
        [KeyState::Retired, KeyState::Active]
    );
    let longer = RotationPolicy {
        max_token_seconds: 3 * DAY,
        ..p
    };
    let set = rotated(&set, &longer, T0 + 7 * DAY + 1);
    // The retired key never signed a longer token; the active one may from now on.
    assert_eq!(set.keys()[0].max_token_seconds(), DAY);
    assert_eq!(set.keys()[1].max_token_seconds(), 3 * DAY);
    // A shorter lifetime later never shortens what was recorded.
    let set = rotated(&set, &p, T0 + 7 * DAY + 2);
    assert_eq!(set.keys()[1].max_token_seconds(), 3 * DAY);
}

#[test]
fn records_are_ordered_by_activation_and_unique() {
    let a = SigningKey::generate(KeyType::P256).unwrap();
    let b = SigningKey::generate(KeyType::P256).unwrap();
    let set = ManagedKeySet::new(vec![
        ManagedKey::new(b.clone(), at(T0), at(T0 + DAY), DAY),
        ManagedKey::new(a.clone(), at(T0), at(T0), DAY),
    ])
    .unwrap();
    assert_eq!(set.keys()[0].kid(), a.kid());
    let err = ManagedKeySet::new(vec![
        ManagedKey::new(a.clone(), at(T0), at(T0), DAY),
        ManagedKey::new(b, at(T0), at(T0 + 1), DAY),
        ManagedKey::new(a.clone(), at(T0), at(T0 + 2), DAY),
    ])
    .unwrap_err();
    assert_eq!(err.to_string(), format!("key {} appears twice", a.kid()));
    // Debug shows the kid and times, never the key.
    let debug = format!("{:?}", set.keys()[0]);
    assert!(
        debug.contains(a.kid()) && !debug.contains("PRIVATE"),
        "{debug}"
    );
}

#[test]
fn policies_that_cannot_keep_their_promises_are_refused() {
    assert_eq!(policy().validate(), Ok(()));
    let short = RotationPolicy {
        publish_ahead_seconds: 59,
        ..policy()
    };
    assert!(
        short
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("--key-publish-ahead of 59s is too short")
    );
    let inverted = RotationPolicy {
        rotation_period_seconds: DAY,
        ..policy()
    };
    assert_eq!(
        inverted.validate().unwrap_err().to_string(),
        "--key-rotation-period (86400s) must be longer than --key-publish-ahead (86400s): each key is published that long before it takes over"
    );
    // Default policy with day-long tokens: next, active and one retired key.
    assert_eq!(policy().most_published_keys(), 3);
}

#[test]
fn revoking_the_signing_key_brings_the_next_one_forward_and_refuses_its_tokens() {
    let p = policy();
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    let with_next = rotated(&first, &p, T0 + 6 * DAY);
    let (a, b) = (with_next.keys()[0].clone(), with_next.keys()[1].clone());
    assert_eq!(
        states(&with_next, T0 + 6 * DAY),
        [KeyState::Active, KeyState::Next]
    );
    let leaked_token = token(a.key(), T0 + 6 * DAY, DAY);

    let now = T0 + 6 * DAY + HOUR;
    let revoked = with_next.revoke(a.kid(), &p, at(now), generate).unwrap();
    assert_eq!(revoked.was, KeyState::Active);
    assert_eq!(
        revoked.replaced_by,
        Some(Replacement::BroughtForward {
            kid: b.kid().to_owned(),
            published_at: at(T0 + 6 * DAY),
        })
    );
    assert_eq!(kids(&revoked.keys), [b.kid()]);
    assert_eq!(states(&revoked.keys, now), [KeyState::Active]);
    assert_eq!(
        revoked.keys.revocations(),
        [Revocation {
            kid: a.kid().to_owned(),
            revoked_at: at(now),
            forget_at: at(now + DAY + REMOVAL_LEEWAY_SECONDS),
            held_in: None,
        }]
    );

    // The keys in force: B signs at once, A is neither published nor accepted, by name.
    let keys = revoked.keys.key_set_at(at(now), &p).unwrap();
    assert_eq!(keys.signing_at(at(now)).unwrap().kid(), b.kid());
    assert!(keys.verifying().iter().all(|k| k.kid() != a.kid()));
    assert_eq!(keys.revoked(), [a.kid().to_owned()]);
    let v = verifier(&keys).with_revoked(keys.revoked().to_vec());
    assert_eq!(
        verify(&v, &leaked_token, now),
        Err(TokenError::Revoked(a.kid().to_owned()))
    );
    assert_eq!(verify(&v, &token(b.key(), now, DAY), now), Ok(()));

    // The next rotation is due a period after B activated.
    let successor = revoked.keys.successor(&p, at(now)).unwrap();
    assert_eq!(successor.activate_at, at(now + 7 * DAY));
}

/// A revoked kid is never forgotten: long after its last token expired, and across rotations,
/// a key file that still offers the key (`--service-account-key-file` beside managed keys) does
/// not bring it back. (Records were once dropped when the last token expired, and the key
/// verified again from the file.)
#[test]
fn a_revoked_key_never_comes_back_from_a_key_file() {
    let p = policy();
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    let with_next = rotated(&first, &p, T0 + 6 * DAY);
    let a = with_next.keys()[0].clone();
    let from_file = [a.key().verifying_key().clone()];
    let now = T0 + 6 * DAY + HOUR;
    let revoked = with_next.revoke(a.kid(), &p, at(now), generate).unwrap();
    let last_token_expired = now + DAY + REMOVAL_LEEWAY_SECONDS;
    assert_eq!(
        revoked.keys.revocations()[0].forget_at,
        at(last_token_expired)
    );
    // Nothing is scheduled for that time: the record does not change then.
    assert_ne!(
        revoked.keys.next_transition(at(now)),
        Some(at(last_token_expired))
    );

    // A year of rotations later, the record is still there, and the file's copy stays out.
    let mut keys = revoked.keys;
    let mut t = now;
    while t < now + 365 * DAY {
        t += HOUR;
        keys = keys.rotate(&p, at(t), generate).unwrap().unwrap_or(keys);
    }
    assert!(keys.keys().iter().all(|k| k.kid() != a.kid()));
    assert_eq!(keys.revocations().len(), 1);
    let merged = keys
        .key_set_at(at(t), &p)
        .unwrap()
        .with_extra_verifying(&from_file);
    assert!(merged.verifying().iter().all(|k| k.kid() != a.kid()));
    assert_eq!(merged.revoked(), [a.kid().to_owned()]);
    assert_eq!(merged.revoked_among(&from_file), [a.kid()]);
    let v = verifier(&merged).with_revoked(merged.revoked().to_vec());
    assert_eq!(
        verify(&v, &token(a.key(), t, DAY), t),
        Err(TokenError::Revoked(a.kid().to_owned()))
    );
}

#[test]
fn revoking_the_only_key_signs_with_a_new_one_at_once() {
    let p = policy();
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    let a = first.keys()[0].kid().to_owned();
    let revoked = first.revoke(&a, &p, at(T0 + DAY), generate).unwrap();
    let Some(Replacement::New { kid }) = &revoked.replaced_by else {
        panic!("{:?}", revoked.replaced_by);
    };
    assert_ne!(kid, &a);
    assert_eq!(kids(&revoked.keys), std::slice::from_ref(kid));
    let new = &revoked.keys.keys()[0];
    assert_eq!(
        (new.published_at(), new.activate_at()),
        (at(T0 + DAY), at(T0 + DAY))
    );
    let keys = revoked.keys.key_set_at(at(T0 + DAY), &p).unwrap();
    assert_eq!(keys.signing_at(at(T0 + DAY)).unwrap().kid(), kid);

    // Twice is an error that says when; an unknown kid too.
    let again = revoked.keys.revoke(&a, &p, at(T0 + DAY + 5), generate);
    assert_eq!(
        again.unwrap_err().to_string(),
        format!("key {a} was revoked already, at 2027-01-16T08:00:00Z")
    );
    assert_eq!(
        first
            .revoke("nope", &p, at(T0), generate)
            .unwrap_err()
            .to_string(),
        "there is no key nope: `warrant keys list` shows the keys"
    );
}

#[test]
fn revoking_a_next_or_retired_key_leaves_the_signing_key_alone() {
    let p = policy();
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    let with_next = rotated(&first, &p, T0 + 6 * DAY);
    let (a, b) = (with_next.keys()[0].clone(), with_next.keys()[1].clone());

    // The next key: gone; A signs on, and rotation publishes a new successor at once (it is
    // overdue), which activates publish-ahead later.
    let now = T0 + 6 * DAY + HOUR;
    let revoked = with_next.revoke(b.kid(), &p, at(now), generate).unwrap();
    assert_eq!((revoked.was, revoked.replaced_by), (KeyState::Next, None));
    assert_eq!(kids(&revoked.keys), [a.kid()]);
    let refilled = rotated(&revoked.keys, &p, now);
    assert_eq!(refilled.keys().len(), 2);
    assert_eq!(refilled.keys()[1].activate_at(), at(now + DAY));
    assert_eq!(refilled.revocations().len(), 1, "rotation keeps the record");

    // A retired key: gone; B signs on.
    let later = T0 + 7 * DAY + HOUR;
    let retired = rotated(&with_next, &p, later);
    assert_eq!(
        states(&retired, later),
        [KeyState::Retired, KeyState::Active]
    );
    let revoked = retired.revoke(a.kid(), &p, at(later), generate).unwrap();
    assert_eq!(
        (revoked.was, revoked.replaced_by),
        (KeyState::Retired, None)
    );
    assert_eq!(kids(&revoked.keys), [b.kid()]);
    assert_eq!(
        revoked
            .keys
            .key_set_at(at(later), &p)
            .unwrap()
            .signing_at(at(later))
            .unwrap()
            .kid(),
        b.kid()
    );
}

/// A key held in an HSM that cannot be reached is revoked all the same when the revocation
/// needs no new key (the next key, or a retired one; the signing key with a published
/// successor): an overdue rotation is left to the store's writer. Revoking the signing key with
/// no successor is recorded too, and stops signing (see the next test).
#[test]
fn a_revocation_needing_no_new_key_needs_no_generator() {
    let p = policy();
    let unreachable =
        |_: KeyType| -> Result<SigningKey, KeyError> { Err(KeyError::Crypto("reach the holder")) };
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    let with_next = rotated(&first, &p, T0 + 6 * DAY);
    let (a, b) = (with_next.keys()[0].clone(), with_next.keys()[1].clone());
    // The next key: recorded.
    let now = T0 + 6 * DAY + HOUR;
    let revoked = with_next.revoke(b.kid(), &p, at(now), unreachable).unwrap();
    assert_eq!(kids(&revoked.keys), [a.kid()]);
    // A is now the only key: revoking it needs a new key to sign, which cannot be made; it is
    // revoked all the same, and nothing signs.
    let alone = revoked
        .keys
        .revoke(a.kid(), &p, at(now), unreachable)
        .unwrap();
    assert_eq!(
        alone.replaced_by,
        Some(Replacement::Pending {
            cause: "crypto library failed to reach the holder".into()
        })
    );
    assert!(alone.keys.is_empty());
    // The signing key with a published successor: brought forward, nothing generated, though
    // the rotation that would follow is left undone.
    let revoked = with_next.revoke(a.kid(), &p, at(now), unreachable).unwrap();
    assert_eq!(kids(&revoked.keys), [b.kid()]);
    // A retired key while a rotation is overdue (B has signed a week, its successor is due):
    // recorded, and the rotation is left to the writer.
    let later = T0 + 14 * DAY;
    let retired = rotated(&with_next, &p, T0 + 7 * DAY + HOUR);
    assert_eq!(
        states(&retired, T0 + 7 * DAY + HOUR),
        [KeyState::Retired, KeyState::Active]
    );
    let long = ManagedKeySet::new(
        retired
            .keys()
            .iter()
            .map(|k| ManagedKey::new(k.key().clone(), k.published_at(), k.activate_at(), 30 * DAY))
            .collect(),
    )
    .unwrap();
    assert!(
        long.next_change(at(later), &p)
            .is_some_and(|t| t <= at(later)),
        "a rotation is due"
    );
    let revoked = long.revoke(a.kid(), &p, at(later), unreachable).unwrap();
    assert_eq!(kids(&revoked.keys), [b.kid()]);
    assert_eq!(revoked.keys.revocations()[0].kid, a.kid());
}

/// Revoking the signing key while its holder cannot make a successor (and none is published:
/// six days of seven) records the revocation and stops signing: the key is out of the JWKS at
/// once, its tokens are refused by name, the keys that verify go on verifying, and nothing
/// signs. The stop is in the stored form. Once a key can be made, rotation makes one that signs
/// at once; keys retired before the stop stay retired and go on schedule, and the stop goes
/// with the last of them.
#[test]
fn revoking_the_signing_key_with_its_holder_away_stops_signing_until_a_key_is_made() {
    let p = policy();
    let unreachable =
        |_: KeyType| -> Result<SigningKey, KeyError> { Err(KeyError::Crypto("reach the holder")) };
    let first = rotated(&ManagedKeySet::default(), &p, T0);
    let with_next = rotated(&first, &p, T0 + 6 * DAY);
    let set = rotated(&with_next, &p, T0 + 7 * DAY);
    let (a, b) = (set.keys()[0].clone(), set.keys()[1].clone());
    // B signs since a minute ago; A retired then, and verifies for a day.
    let now = T0 + 7 * DAY + 60;
    let issued_by_b = token(b.key(), now - 30, HOUR);
    let issued_by_a = token(a.key(), T0 + 7 * DAY - 30, HOUR);
    let revoked = set.revoke(b.kid(), &p, at(now), unreachable).unwrap();
    assert_eq!(revoked.was, KeyState::Active);
    assert!(matches!(
        revoked.replaced_by,
        Some(Replacement::Pending { .. })
    ));
    let keys = revoked.keys;
    assert_eq!(keys.stopped(), Some(at(now)));
    assert_eq!(keys.stopped_at(at(now)), Some(at(now)));
    assert!(keys.active_at(at(now)).is_none());
    assert_eq!(states(&keys, now), [KeyState::Retired]);

    let served = keys.key_set_at(at(now), &p).unwrap();
    assert_eq!(
        served.signing_at(at(now)).unwrap_err(),
        crate::SigningStopped { since: at(now) }
    );
    let published: Vec<&str> = served.verifying().iter().map(|k| k.kid()).collect();
    assert_eq!(published, [a.kid()]);
    let v = verifier(&served).with_revoked(served.revoked().to_vec());
    assert_eq!(
        verify(&v, &issued_by_b, now),
        Err(TokenError::Revoked(b.kid().to_owned()))
    );
    assert_eq!(verify(&v, &issued_by_a, now), Ok(()));
    // A successor is due at once, and keeps being due while none can be made.
    assert_eq!(keys.next_change(at(now + 600), &p), Some(at(now)));
    assert!(keys.rotate(&p, at(now + 600), unreachable).is_err());

    // What the store holds says so, and reads back the same.
    let encoded = crate::encode(&keys, 9).unwrap();
    let files: std::collections::BTreeMap<String, Vec<u8>> = encoded
        .files()
        .map(|(n, b)| (n.to_owned(), b.to_vec()))
        .collect();
    let index = String::from_utf8(files[crate::INDEX_FILE].clone()).unwrap();
    assert!(
        index.contains(&format!(r#""signingStoppedAt": "{}""#, at(now))),
        "{index}"
    );
    let decoded = crate::decode(
        "test store",
        &files[crate::INDEX_FILE],
        Some(crate::KeyPurpose::Tokens),
        None,
        |name| Ok(files.get(name).cloned()),
    )
    .unwrap();
    let (read, _) = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(decoded.vouched())
        .unwrap();
    assert!(read.same_records(&keys));

    // The holder is back ten minutes later: the key made signs at once.
    let back = now + 600;
    let made = rotated(&keys, &p, back);
    let c = made.keys().last().unwrap().clone();
    assert_eq!((c.published_at(), c.activate_at()), (at(back), at(back)));
    assert_eq!(made.stopped_at(at(back)), None);
    let served = made.key_set_at(at(back), &p).unwrap();
    assert_eq!(served.signing_at(at(back)).unwrap().kid(), c.kid());
    // A retired at the stop, not at C's activation: it goes a day (and the leeway) after.
    assert_eq!(states(&made, back), [KeyState::Retired, KeyState::Active]);
    let gone = now + DAY + REMOVAL_LEEWAY_SECONDS;
    assert_eq!(states(&made, gone), [KeyState::Removed, KeyState::Active]);
    let later = rotated(&made, &p, gone);
    assert_eq!(kids(&later), [c.kid()]);
    assert_eq!(
        later.stopped(),
        None,
        "the stop goes with the last key before it"
    );
    assert_eq!(later.revocations()[0].kid, b.kid());
}

/// What a publish target lists: exactly these keys, as warrant renders them.
fn listing(keys: &[&ManagedKey]) -> ListedKeys {
    ListedKeys::of(keys.iter().map(|k| k.key().verifying_key()))
}

/// The activation gate: a successor the publish targets do not list is held back, a lead at a
/// time; listed, it signs on time; the first key and a key already signing are never held.
#[test]
fn the_gate_holds_an_unlisted_successor_and_lets_a_listed_one_sign() {
    let policy = policy();
    let lead = policy.gate_lead_seconds();
    assert_eq!(
        lead, GATE_LEAD_MAX_SECONDS,
        "a day's publish-ahead: an hour's lead"
    );
    let nothing = ListedKeys::none();
    let set = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let first = set.keys()[0].clone();
    // The first key signs at once whatever the targets say.
    assert!(set.hold_unlisted(&policy, at(T0), &nothing).is_none());
    let set = set
        .rotate(&policy, at(T0 + 6 * DAY), SigningKey::generate)
        .unwrap()
        .unwrap();
    let next = set.keys()[1].clone();
    let both = listing(&[&first, &next]);
    let due = at(T0 + 7 * DAY);
    assert_eq!(next.activate_at(), due);
    // Before the lead, nothing to do; the gate next looks when the lead begins.
    assert!(
        set.hold_unlisted(&policy, at(T0 + 7 * DAY - lead - 1), &nothing)
            .is_none()
    );
    assert_eq!(
        set.next_gate_check(&policy, at(T0 + 6 * DAY)),
        Some(at(T0 + 7 * DAY - lead))
    );
    // Listed: it signs on time.
    assert!(
        set.hold_unlisted(&policy, at(T0 + 7 * DAY - 1), &both)
            .is_none()
    );
    // Not listed within the lead: held two leads from now; the first key signs on, and its
    // removal moves with its retirement.
    let now = at(T0 + 7 * DAY - lead);
    let (held, holds) = set
        .hold_unlisted(&policy, now, &listing(&[&first]))
        .unwrap();
    let to = at(T0 + 7 * DAY + lead);
    assert_eq!(
        holds,
        vec![Hold {
            kid: next.kid().to_owned(),
            from: due,
            to
        }]
    );
    assert_eq!(held.active_at(due).unwrap().kid(), first.kid());
    assert_eq!(held.state_at(next.kid(), due), Some(KeyState::Next));
    let schedule = held.schedule(due);
    assert_eq!(schedule[0].retire_at, Some(to));
    assert_eq!(
        schedule[0].remove_at,
        Some(at(T0 + 7 * DAY + lead + DAY + REMOVAL_LEEWAY_SECONDS))
    );
    // Still unlisted a lead later: held again (bounded: two leads from each look).
    let (again, holds) = held
        .hold_unlisted(&policy, at(T0 + 7 * DAY), &nothing)
        .unwrap();
    assert_eq!(holds[0].to, at(T0 + 7 * DAY + 2 * lead));
    // Listed at last: it signs at the held time, not later.
    assert!(
        again
            .hold_unlisted(&policy, at(T0 + 7 * DAY + lead + 1), &both)
            .is_none()
    );
    assert_eq!(
        again.active_at(at(T0 + 7 * DAY + 2 * lead)).unwrap().kid(),
        next.kid()
    );
    // A key already signing is never taken back.
    assert!(
        again
            .hold_unlisted(&policy, at(T0 + 7 * DAY + 2 * lead), &nothing)
            .is_none()
    );
}

/// The gate reads what a target's JWKS lists by key material, as a relying party uses it: each
/// JWKS a bucket's writer could leave, and whether the successor may sign on time.
#[test]
fn the_gate_compares_key_material_not_kid_strings() {
    use serde_json::{Value, json};
    let policy = policy();
    let lead = policy.gate_lead_seconds();
    let set = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let set = rotated(&set, &policy, T0 + 6 * DAY);
    let (first, next) = (set.keys()[0].key().clone(), set.keys()[1].key().clone());
    let stranger = SigningKey::generate(KeyType::P256).unwrap();
    let jwk = |key: &SigningKey| -> Value {
        serde_json::from_str(key.verifying_key().jwk_json()).unwrap()
    };
    let renamed = |key: &SigningKey, kid: &str| {
        let mut v = jwk(key);
        v["kid"] = json!(kid);
        v
    };
    let jwks = |keys: Vec<Value>| serde_json::to_vec(&json!({ "keys": keys })).unwrap();
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("both keys", jwks(vec![jwk(&first), jwk(&next)]), true),
        ("the key in force only", jwks(vec![jwk(&first)]), false),
        (
            "the next kid on another key's material",
            jwks(vec![jwk(&first), renamed(&stranger, next.kid())]),
            false,
        ),
        (
            "the next kid on the key in force's material",
            jwks(vec![jwk(&first), renamed(&first, next.kid())]),
            false,
        ),
        (
            "the next key's material under another kid",
            jwks(vec![jwk(&first), renamed(&next, "next")]),
            false,
        ),
        (
            "the next kid twice, a forgery first",
            jwks(vec![renamed(&stranger, next.kid()), jwk(&next)]),
            false,
        ),
        ("not a JWKS", b"{}".to_vec(), false),
    ];
    let now = at(T0 + 7 * DAY - lead);
    for (what, document, signs_on_time) in cases {
        let held = set.hold_unlisted(&policy, now, &ListedKeys::from_jwks(&document));
        assert_eq!(held.is_none(), signs_on_time, "{what}");
        if let Some((held, holds)) = held {
            assert_eq!(holds[0].kid, next.kid(), "{what}");
            assert_eq!(
                held.active_at(at(T0 + 7 * DAY)).unwrap().kid(),
                first.kid(),
                "{what}"
            );
        }
    }
}

#[test]
fn the_gate_lead_is_half_the_publish_ahead_at_most_an_hour() {
    let mut policy = policy();
    policy.publish_ahead_seconds = 60;
    assert_eq!(policy.gate_lead_seconds(), 30);
    policy.publish_ahead_seconds = 2 * HOUR;
    assert_eq!(policy.gate_lead_seconds(), HOUR);
}
