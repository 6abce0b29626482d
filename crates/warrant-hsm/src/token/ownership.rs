//! How a token vouches for the keys it holds for warrant, and why only those are destroyed: the
//! PKCS#11 side of `warrant_keys::KeyHolder::vouch` and `dispose` (the rule, "whatever a store
//! entry claims about a held key is checked against the holder", is warrant-keys').
//!
//! **The proof.** Every key warrant generates or imports has, beside its private key object, a
//! public key object with the same random `CKA_ID`, `CKA_LABEL` set to the kid, and
//! `CKA_PRIVATE` true. A PKCS#11 session that has not logged in with the user PIN cannot create
//! a private object (`CKR_USER_NOT_LOGGED_IN`), nor see or destroy one, so such an object, holding
//! the recorded public key under the recorded id and labelled by its kid, is something only
//! warrant (or whoever holds the PIN, which can sign with warrant's keys anyway) made. It stays
//! when the private half is destroyed at the key's retirement, which is what lets a retired key
//! keep verifying; it is destroyed with the key when the key is revoked or removed, so no store
//! can list the key again. Whoever can write the key store but has no PIN can do neither.
//!
//! A key made before public objects were private (or by another tool) has a public object
//! anyone could have made. Its private key object then vouches for it: `CKA_PRIVATE`, labelled by
//! the kid, and it signs a challenge that verifies with the recorded public key. At retirement,
//! before the private half goes, the private proof object is made from the verified public
//! object, so the key stays vouched for.
//!
//! **Destroying.** Only an object proven to be the recorded key is destroyed: the private key
//! object must be `CKA_PRIVATE`, labelled by the kid and sign a challenge that verifies with a
//! public key object of that kid under the same id. A public key object goes (when the key is
//! revoked or removed) only if it is a proof, or if the key is proven warrant's by a proof or
//! its private key and the object holds the key labelled by its kid (a key made before proofs
//! were private). Anything else at the locator is left alone and reported: another application's
//! key, or its public key object alone, whose public key anyone can read and name, with its kid,
//! in a forged store entry.
//!
//! **Purposes.** The label says what the key is for as well ([`KeyPurpose`]): a token key's is
//! its kid, as it always was; a pod certificate CA key's is `pod-certificate-ca:` and its kid
//! ([`object_label`]). Every check above compares the label with the one the purpose asked
//! about gives, so a CA key is never vouched for (nor destroyed) as a token key, nor the
//! reverse: whoever can write the token keys' store cannot list a CA key there and have
//! warrant sign tokens with it. Since only a session with the PIN makes private objects, the
//! label is as trustworthy as the rest of the proof.
//!
//! **The limit.** A token (a partition) is one trust domain: its PIN's user can make objects that
//! pass these checks. Give each warrant deployment its own token or partition, and never share the
//! PIN with another application.

use cryptoki::object::{Attribute, AttributeType, ObjectClass, ObjectHandle};
use warrant_keys::{Disposal, Disposed, KeyPurpose};
use warrant_token::VerifyingKey;

use super::signing::mechanism;
use super::templates::{object_label, public_template};
use super::{PUBLIC_KEY_ATTRIBUTES, Pooled, PublicObject, Token, find, public_objects};
use crate::error::HsmError;
use crate::uri::Pkcs11Uri;

/// What warrant signs to prove that a private key object is the recorded key. Not a JWS: no
/// relying party can take the signature for a token (and it is never kept or shown).
const CHALLENGE: &[u8] = b"warrant: does this object hold the recorded key?";

impl Token {
    /// Vouches for key `public` at `CKA_ID` `id`, kept for `purpose` (see the module's doc): a
    /// private public key object labelled for it ([`object_label`]) holds it, or (for a key
    /// made before those) its private key object proves to be it. [`HsmError::NotHeld`] says
    /// why not. Blocks.
    pub fn vouch(
        &self,
        id: &[u8],
        public: &VerifyingKey,
        purpose: KeyPurpose,
    ) -> Result<(), HsmError> {
        let label = object_label(purpose, public.kid());
        let key_uri = self.uri().with_object(id, Some(&label));
        self.call("vouch", |s, e| {
            let (objects, _) = public_objects(s, &key_uri, id)?;
            if objects.iter().any(|o| is_proof(o, public, &label)) {
                return Ok(());
            }
            match proven_private_keys(s, &key_uri, id, public, &label)? {
                Ok(_) => Ok(()),
                Err(reason) => Err(self.confirm_present(e).map_or_else(
                    |gone| gone,
                    |()| HsmError::NotHeld {
                        uri: key_uri.to_string(),
                        kid: public.kid().to_owned(),
                        reason,
                    },
                )),
            }
        })
    }

    /// Disposes of key `kid` at `CKA_ID` `id`, kept for `purpose`: its private key object (after
    /// making sure a proof object stays, for [`Disposal::Retire`]), or all of it
    /// ([`Disposal::Forget`]). Only objects proven to be the key, labelled for `purpose`, are
    /// destroyed; otherwise nothing is, and [`Disposed::NotTheKey`] says why. Blocks.
    pub fn dispose(
        &self,
        id: &[u8],
        kid: &str,
        disposal: Disposal,
        purpose: KeyPurpose,
    ) -> Result<Disposed, HsmError> {
        let label = object_label(purpose, kid);
        let key_uri = self.uri().with_object(id, Some(&label));
        self.call("destroy", |s, e| {
            let (objects, _) = public_objects(s, &key_uri, id)?;
            let privates = find(&s.session, ObjectClass::PRIVATE_KEY, id)
                .map_err(|e| HsmError::pkcs11(&key_uri, "C_FindObjects", e))?;
            let Some(recorded) = objects.iter().find(|o| o.key.kid() == kid) else {
                // Nothing of the key: gone, or the token is (which finds nothing either).
                self.confirm_present(e)?;
                if objects.is_empty() && privates.is_empty() {
                    return Ok(Disposed::Gone);
                }
                return Ok(Disposed::NotTheKey(format!(
                    "{key_uri}: no public key object with this CKA_ID holds key {kid}"
                )));
            };
            let public = recorded.key.clone();
            let proven = if privates.is_empty() {
                Vec::new()
            } else {
                match proven_private_keys(s, &key_uri, id, &public, &label)? {
                    Ok(proven) => proven,
                    Err(reason) => return Ok(Disposed::NotTheKey(format!("{key_uri}: {reason}"))),
                }
            };
            let mut destroyed = false;
            match disposal {
                Disposal::Retire => {
                    if proven.is_empty() {
                        self.confirm_present(e)?;
                        return Ok(Disposed::Gone);
                    }
                    if !objects.iter().any(|o| is_proof(o, &public, &label)) {
                        make_proof(s, &key_uri, id, &label, recorded.handle)?;
                    }
                }
                Disposal::Forget => {
                    let ours =
                        warrants_public_objects(&objects, &public, &label, !proven.is_empty());
                    if ours.is_empty() && proven.is_empty() {
                        return Ok(Disposed::NotTheKey(format!(
                            "{key_uri}: no object with this CKA_ID is provably warrant's key {kid} for {purpose} (its public key objects are not private, or not labelled {label:?}, and no private key object proves it)"
                        )));
                    }
                    for handle in ours {
                        destroy(s, &key_uri, handle)?;
                        destroyed = true;
                    }
                }
            }
            for handle in proven {
                destroy(s, &key_uri, handle)?;
                destroyed = true;
            }
            s.forget_handle(id);
            Ok(if destroyed {
                Disposed::Destroyed
            } else {
                Disposed::Gone
            })
        })
    }

    /// Takes from the private key object of `id` every use but signing (`CKA_DECRYPT`,
    /// `CKA_UNWRAP`, `CKA_DERIVE`), for keys made before warrant set them false at creation.
    /// Returns whether anything changed. Blocks.
    pub fn restrict_to_signing(&self, id: &[u8]) -> Result<bool, HsmError> {
        let key_uri = self.uri().with_object(id, None);
        self.call("restrict", |s, _| {
            let handles = find(&s.session, ObjectClass::PRIVATE_KEY, id)
                .map_err(|e| HsmError::pkcs11(&key_uri, "C_FindObjects", e))?;
            let mut changed = false;
            for handle in handles {
                let attrs = s
                    .session
                    .get_attributes(
                        handle,
                        &[
                            AttributeType::Decrypt,
                            AttributeType::Unwrap,
                            AttributeType::Derive,
                        ],
                    )
                    .map_err(|e| HsmError::pkcs11(&key_uri, "C_GetAttributeValue", e))?;
                let narrowed: Vec<Attribute> = attrs
                    .into_iter()
                    .filter_map(|a| match a {
                        Attribute::Decrypt(true) => Some(Attribute::Decrypt(false)),
                        Attribute::Unwrap(true) => Some(Attribute::Unwrap(false)),
                        Attribute::Derive(true) => Some(Attribute::Derive(false)),
                        _ => None,
                    })
                    .collect();
                if narrowed.is_empty() {
                    continue;
                }
                s.session
                    .update_attributes(handle, &narrowed)
                    .map_err(|e| HsmError::pkcs11(&key_uri, "C_SetAttributeValue", e))?;
                changed = true;
            }
            Ok(changed)
        })
    }
}

/// True when `object` is the proof that warrant holds `public`: made by a logged-in session,
/// labelled `label` (the kid, for its purpose), holding the key.
fn is_proof(object: &PublicObject, public: &VerifyingKey, label: &str) -> bool {
    object.private && labelled_key(object, public, label)
}

/// The public key objects among `objects` (all of one `CKA_ID`) that are provably warrant's key
/// `public`, to destroy with it: its proofs ([`is_proof`]: private, labelled by the kid, holding
/// the key), and, when the key is proven to be warrant's (a proof exists, or `private_proven`:
/// its private key object signed the challenge), the public objects a key made before proofs
/// were private has, labelled by the kid and holding the key. Any other object (another
/// application's public key, whatever id, label or key a store entry names) is never among them.
fn warrants_public_objects(
    objects: &[PublicObject],
    public: &VerifyingKey,
    label: &str,
    private_proven: bool,
) -> Vec<ObjectHandle> {
    let proven = private_proven || objects.iter().any(|o| is_proof(o, public, label));
    objects
        .iter()
        .filter(|o| is_proof(o, public, label) || (proven && labelled_key(o, public, label)))
        .map(|o| o.handle)
        .collect()
}

/// True when `object` holds `public` under `label`, the one warrant gives it ([`object_label`]).
fn labelled_key(object: &PublicObject, public: &VerifyingKey, label: &str) -> bool {
    object.label.as_deref() == Some(label) && &object.key == public
}

/// The private key objects of `id`, each proven to be `public`'s key: `CKA_PRIVATE` (the only
/// ones [`find`] returns), labelled `expected` ([`object_label`]), and signing [`CHALLENGE`] so
/// that `public` verifies it. `Ok(Err(reason))` when there is none, or one is not.
fn proven_private_keys(
    s: &Pooled,
    key_uri: &Pkcs11Uri,
    id: &[u8],
    public: &VerifyingKey,
    expected: &str,
) -> Result<Result<Vec<ObjectHandle>, String>, HsmError> {
    let handles = find(&s.session, ObjectClass::PRIVATE_KEY, id)
        .map_err(|e| HsmError::pkcs11(key_uri, "C_FindObjects", e))?;
    if handles.is_empty() {
        return Ok(Err(
            "no public key object that only a session with the PIN can create holds it, and no private key object with this CKA_ID proves it".into(),
        ));
    }
    let (mechanism, digest) = mechanism(public.algorithm(), CHALLENGE);
    let data = digest.as_ref().map_or(CHALLENGE, |d| d.as_ref());
    for &handle in &handles {
        let label = s
            .session
            .get_attributes(handle, &[AttributeType::Label])
            .map_err(|e| HsmError::pkcs11(key_uri, "C_GetAttributeValue", e))?
            .into_iter()
            .find_map(|a| match a {
                Attribute::Label(v) => Some(String::from_utf8_lossy(&v).into_owned()),
                _ => None,
            })
            .unwrap_or_default();
        if label != expected {
            return Ok(Err(format!(
                "the private key object with this CKA_ID is labelled {label:?}, not with the key's kid as warrant labels it for this key set ({expected:?}): warrant did not make it for this key set"
            )));
        }
        let proves = s
            .session
            .sign(&mechanism, handle, data)
            .is_ok_and(|sig| public.verify(CHALLENGE, &sig));
        if !proves {
            return Ok(Err(
                "the private key object with this CKA_ID is not the recorded key: a signature it makes does not verify with the recorded public key".into(),
            ));
        }
    }
    Ok(Ok(handles))
}

/// Makes the proof object labelled `label` from the public key object `from` (verified to hold
/// the key): the same key attributes, with warrant's public key template.
fn make_proof(
    s: &Pooled,
    key_uri: &Pkcs11Uri,
    id: &[u8],
    label: &str,
    from: ObjectHandle,
) -> Result<(), HsmError> {
    let mut template: Vec<Attribute> = s
        .session
        .get_attributes(from, &PUBLIC_KEY_ATTRIBUTES)
        .map_err(|e| HsmError::pkcs11(key_uri, "C_GetAttributeValue", e))?;
    template.push(Attribute::Class(ObjectClass::PUBLIC_KEY));
    template.extend(public_template(id, label));
    s.session
        .create_object(&template)
        .map_err(|e| HsmError::pkcs11(key_uri, "C_CreateObject (proof of the key)", e))?;
    tracing::info!(%label, uri = %key_uri, "made the key's public key object private, so the token vouches for it once its private half is destroyed");
    Ok(())
}

fn destroy(s: &Pooled, key_uri: &Pkcs11Uri, handle: ObjectHandle) -> Result<(), HsmError> {
    s.session
        .destroy_object(handle)
        .map_err(|e| HsmError::pkcs11(key_uri, "C_DestroyObject", e))
}
