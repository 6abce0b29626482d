//! What one review may cost, and how many may run at once: the webhook is a door anyone who
//! reaches the port can knock on, so every review is bounded whoever sends it, and a review
//! past a bound is answered with a `Status` naming the bound (kube-apiserver then applies the
//! webhook's `failurePolicy`) before it costs more.
//!
//! In the order they are checked:
//! - reviews in flight ([`AdmissionLimits::max_in_flight`]): one more is a 429, at once;
//! - the body's bytes ([`AdmissionLimits::max_review_bytes`]): read no further than that, 413;
//! - the JSON values in it ([`MAX_REVIEW_VALUES`]), counted before anything is built from them:
//!   a parsed value costs up to some 700 bytes (an object of one member), so this bounds the
//!   memory of a review's parsed form (about 20 MiB at worst, a real pod a few hundred KiB)
//!   where the byte bound alone would let a 2 MiB body of tiny objects cost a hundred times
//!   its size, 413;
//! - containers and init containers ([`AdmissionLimits::max_containers`] each): the patch
//!   grows with them, 413;
//! - the patch ([`AdmissionLimits::max_patch_bytes`]), 413.
//!
//! So a replica's memory for reviews is at most `max_in_flight` × about 20 MiB, whatever is
//! sent (docs/injection.md, "Limits").

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::ApiError;

/// The most JSON values (objects, arrays, strings, numbers, booleans, nulls) one review may
/// hold. A pod of fifty containers with fifty variables each, its managed fields included,
/// holds about 20,000.
pub const MAX_REVIEW_VALUES: usize = 60_000;

/// The bounds of one review and of the reviews answered at once (`warrant serve
/// --injection-max-…`, docs/injection.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimits {
    /// The largest AdmissionReview read (bytes). Default 2 MiB: etcd stores no object over
    /// 1.5 MiB, so a pod that can be created fits with its review around it.
    pub max_review_bytes: usize,
    /// The most containers, and the most init containers, of a pod (each list alone).
    pub max_containers: usize,
    /// The largest patch answered (bytes, before base64).
    pub max_patch_bytes: usize,
    /// The most reviews answered at once by this replica.
    pub max_in_flight: usize,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        AdmissionLimits {
            max_review_bytes: 2 * 1024 * 1024,
            max_containers: 128,
            max_patch_bytes: 1024 * 1024,
            max_in_flight: 16,
        }
    }
}

/// The reviews being answered now.
#[derive(Debug, Default)]
pub(crate) struct InFlight(Arc<AtomicUsize>);

/// One review's place among those in flight; dropping it frees the place.
#[derive(Debug)]
pub(crate) struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InFlight {
    /// A place for one more review, or `None` when `max` are answered already.
    pub(crate) fn enter(&self, max: usize) -> Option<Slot> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max.max(1)).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.0.clone()))
    }
}

/// Refused at once: `max` reviews are being answered.
pub(crate) fn too_many(max: usize) -> ApiError {
    ApiError::too_many_requests_saying(
        1,
        format!(
            "warrant is answering {max} admission reviews already, its limit (--injection-max-reviews-in-flight): try again shortly"
        ),
    )
}

/// The body was larger than `max` bytes.
pub(crate) fn body_too_large(max: usize) -> ApiError {
    ApiError::too_large_saying(format!(
        "the AdmissionReview is larger than {max} bytes, the limit of warrant's webhook (--injection-max-review-bytes)"
    ))
}

/// Refuses a JSON body of more than `max` values, without building any of them; a body that
/// is not JSON passes (the decoder says what is wrong with it).
pub(crate) fn check_values(bytes: &[u8], max: usize) -> Result<(), ApiError> {
    let left = Cell::new(max);
    let over = Cell::new(false);
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let counted = Counting {
        left: &left,
        over: &over,
    }
    .deserialize(&mut reader);
    if counted.is_err() && over.get() {
        return Err(ApiError::too_large_saying(format!(
            "the AdmissionReview holds more than {max} JSON values, the most warrant's webhook reads"
        )));
    }
    Ok(())
}

/// Refuses a pod whose `field` (`containers`, `initContainers`) lists more than `max`.
pub(crate) fn check_containers(
    pod: &serde_json::Value,
    field: &str,
    max: usize,
) -> Result<(), ApiError> {
    let count = pod
        .get("spec")
        .and_then(|spec| spec.get(field))
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len);
    if count > max {
        return Err(ApiError::too_large_saying(format!(
            "the pod has {count} {}, more than the {max} warrant's webhook mutates (--injection-max-containers)",
            if field == "containers" {
                "containers"
            } else {
                "init containers"
            }
        )));
    }
    Ok(())
}

/// Refuses a patch of `len` bytes over `max`.
pub(crate) fn check_patch(len: usize, max: usize) -> Result<(), ApiError> {
    if len > max {
        return Err(ApiError::too_large_saying(format!(
            "the patch for this pod would be {len} bytes, more than the limit of {max} (--injection-max-patch-bytes)"
        )));
    }
    Ok(())
}

/// Counts the values of a JSON document down from `left`, failing (with `over` set) when
/// there are more; nothing is kept.
#[derive(Clone, Copy)]
struct Counting<'a> {
    left: &'a Cell<usize>,
    over: &'a Cell<bool>,
}

impl Counting<'_> {
    fn take<E: serde::de::Error>(self) -> Result<(), E> {
        match self.left.get().checked_sub(1) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.over.set(true);
                Err(E::custom("too many values"))
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counting<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counting<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.take()
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.take()
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.take()
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.take()
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.take()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.take()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.take()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.take()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_without_being_kept() {
        let body = br#"{"a": [1, "x", null, true, {"b": {}}], "c": 2.5}"#;
        // The object, the array, its five items, `b`'s object, and `c`: 9.
        assert!(check_values(body, 9).is_ok());
        let refused = check_values(body, 8).unwrap_err();
        assert_eq!(refused.code(), http::StatusCode::PAYLOAD_TOO_LARGE);
        assert!(refused.message().contains("more than 8 JSON values"));
        // Not JSON: the decoder's to say.
        assert!(check_values(b"{not json", 1).is_ok());
    }

    #[test]
    fn places_in_flight_are_given_back() {
        let in_flight = InFlight::default();
        let first = in_flight.enter(2).unwrap();
        let second = in_flight.enter(2).unwrap();
        assert!(in_flight.enter(2).is_none());
        drop(first);
        let third = in_flight.enter(2).unwrap();
        assert!(in_flight.enter(2).is_none());
        drop((second, third));
        assert!(in_flight.enter(2).is_some());
    }
}
