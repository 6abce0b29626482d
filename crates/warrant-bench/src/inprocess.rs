//! The micro-measurements the load table's limits are made of, taken in this process on the
//! same machine just before the load runs: a signature, a verification, the object lookups of a
//! review, and the SHA-256 of a token (the signature cache's key), each the median of many
//! samples on the real clock.

// A benchmark measures on the real clock.
#![allow(clippy::disallowed_types)]

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use warrant_objects::{FileSource, Objects, check_token_objects};
use warrant_token::{SigningKey, Verifier};

use crate::Error;
use crate::objects::Cluster;

/// Median times, in µs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Costs {
    /// Signing the claims of a pod-bound token (serializing them included).
    pub(crate) sign: f64,
    /// Verifying such a token: split, decode, signature, issuer, audience, time.
    pub(crate) verify: f64,
    /// What a review does beyond verifying: the object checks (service account, pod and node
    /// looked up in the objects file's snapshot, their UIDs compared) and the user it names.
    pub(crate) lookups: f64,
    /// SHA-256 of the token: what a review answered from the signature cache hashes.
    pub(crate) sha256: f64,
}

/// Samples per figure.
const SAMPLES: usize = 201;

/// The median over [`SAMPLES`] samples of `op`'s time, in µs. Operations shorter than about
/// 20 µs are timed in batches (a sample is a batch's mean), so the clock's own cost is noise.
fn median_micros(mut op: impl FnMut()) -> f64 {
    let started = Instant::now();
    op();
    let once = started.elapsed().max(Duration::from_nanos(50));
    let batch = (Duration::from_micros(20).as_nanos() / once.as_nanos()).clamp(1, 10_000) as u32;
    let mut samples: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..batch {
                op();
            }
            started.elapsed().as_secs_f64() * 1e6 / f64::from(batch)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples.get(SAMPLES / 2).copied().unwrap_or_default()
}

/// Measures the costs for `key`, over the objects file `objects` of `cluster`.
pub(crate) fn measure(
    key: &SigningKey,
    issuer: &str,
    cluster: &Cluster,
    objects: &Path,
) -> Result<Costs, Error> {
    let now = jiff::Timestamp::now();
    let claims = cluster.claims(issuer, 4321, now.as_second());
    let token = key.sign(&claims)?;
    let sign = median_micros(|| {
        let _ = black_box(key.sign(black_box(&claims)));
    });
    let verifier = Verifier::new(
        vec![issuer.to_owned()],
        vec![issuer.to_owned()],
        vec![key.verifying_key().clone()],
    );
    let verify = median_micros(|| {
        let _ = black_box(verifier.verify(black_box(&token), &[], now));
    });
    let verified = verifier.verify(&token, &[], now)?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let source = runtime.block_on(FileSource::load(objects, now))?;
    let objects = Objects::new(Arc::new(source));
    // Every object is in the file's snapshot, so the checks finish at their first poll: polled
    // once, without a runtime's cost around them (as the server's task polls them). They must
    // pass, or this would time a failure.
    let check = || check_token_objects(&objects, black_box(&verified.claims), now).now_or_never();
    match check() {
        Some(Ok(())) => {}
        Some(Err(e)) => return Err(format!("the object checks failed: {e}").into()),
        None => return Err("the object checks did not finish at their first poll".into()),
    }
    let lookups = median_micros(|| {
        let _ = black_box(check());
        black_box(verified.user_info());
    });
    let sha256 = median_micros(|| {
        black_box(aws_lc_rs::digest::digest(
            &aws_lc_rs::digest::SHA256,
            black_box(token.as_bytes()),
        ));
    });
    Ok(Costs {
        sign,
        verify,
        lookups,
        sha256,
    })
}
