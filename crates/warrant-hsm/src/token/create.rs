//! Making keys in the token: generated there, or imported from PEM, as non-extractable,
//! sensitive keys that sign and do nothing else, with a public key object beside each. A
//! creation that fails half-way leaves no object behind.

use std::sync::Arc;

use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, KeyType as CkKeyType, ObjectClass, ObjectHandle};
use cryptoki::session::Session;
use warrant_keys::KeyPurpose;
use warrant_token::{Algorithm, KeyType, PemKey, SigningKey, VerifyingKey};

use super::templates::{object_label, private_template, public_template};
use super::{HsmKey, Pooled, Token};
use crate::der;
use crate::error::HsmError;
use crate::module::Entered;
use crate::uri::Pkcs11Uri;

impl Token {
    /// Generates a key pair inside the token: private key `CKA_TOKEN`, `CKA_PRIVATE`,
    /// `CKA_SENSITIVE` true, `CKA_EXTRACTABLE` false, `CKA_SIGN` true and every other use false;
    /// public key `CKA_PRIVATE` too (see the module's doc); both halves with `id` and `label`
    /// (the token vouches only for keys labelled by their kid: see
    /// [`generate_labelled_by_kid`](Self::generate_labelled_by_kid)). Refuses an `id` already in
    /// use. If anything after the generation fails, both objects are destroyed again. Blocks.
    pub fn generate(&self, key_type: KeyType, id: &[u8], label: &str) -> Result<HsmKey, HsmError> {
        self.generate_labelled(key_type, id, Ok(label))
    }

    /// [`generate`](Self::generate), labelling both objects with the new key's kid (known only
    /// once the token has made the key) and `purpose` ([`object_label`]): `CKA_LABEL` is then
    /// what `warrant keys list` and the JWKS call the key, and what the token vouches for it
    /// as. If the label cannot be set, both objects are destroyed again. Blocks.
    pub fn generate_labelled_by_kid(
        &self,
        key_type: KeyType,
        id: &[u8],
        purpose: KeyPurpose,
    ) -> Result<HsmKey, HsmError> {
        self.generate_labelled(key_type, id, Err(purpose))
    }

    /// Generates a key labelled `Ok(label)`, or by its kid for `Err(purpose)`.
    fn generate_labelled(
        &self,
        key_type: KeyType,
        id: &[u8],
        label: Result<&str, KeyPurpose>,
    ) -> Result<HsmKey, HsmError> {
        let key_uri = self.inner.uri.with_object(id, label.ok());
        let (label, by_kid) = match label {
            Ok(label) => (label, None),
            Err(purpose) => ("", Some(purpose)),
        };
        self.call("generate", |s, e| {
            self.refuse_taken_id(s, id, &key_uri)?;
            let (mechanism, mut public, alg) = match key_type {
                KeyType::Rsa2048 | KeyType::Rsa3072 => {
                    let bits: u64 = if key_type == KeyType::Rsa2048 {
                        2048
                    } else {
                        3072
                    };
                    let public = vec![
                        Attribute::ModulusBits(bits.into()),
                        Attribute::PublicExponent(vec![0x01, 0x00, 0x01]),
                    ];
                    (Mechanism::RsaPkcsKeyPairGen, public, Algorithm::RS256)
                }
                KeyType::P256 | KeyType::P384 | KeyType::P521 => {
                    let alg = key_type.algorithm();
                    let params = der::ec_params(alg).ok_or(HsmError::KeyType(key_type))?;
                    (
                        Mechanism::EccKeyPairGen,
                        vec![Attribute::EcParams(params.to_vec())],
                        alg,
                    )
                }
            };
            public.extend(public_template(id, label));
            let private = private_template(id, label);
            let (pub_h, priv_h) = s
                .session
                .generate_key_pair(&mechanism, &public, &private)
                .map_err(|e| HsmError::pkcs11(&key_uri, "C_GenerateKeyPair", e))?;
            let mut key = self.finish_new_key(e, s, &key_uri, id, Some(alg), &[pub_h, priv_h])?;
            if let Some(purpose) = by_kid {
                let kid = object_label(purpose, key.kid());
                let labelled = [Attribute::Label(kid.as_bytes().to_vec())];
                for h in [pub_h, priv_h] {
                    if let Err(err) = s.session.update_attributes(h, &labelled) {
                        destroy_all(&s.session, &[pub_h, priv_h]);
                        s.handles.remove(id);
                        return Err(HsmError::pkcs11(
                            &key_uri,
                            "C_SetAttributeValue (CKA_LABEL)",
                            err,
                        ));
                    }
                }
                key.uri = Arc::new(self.inner.uri.with_object(id, Some(&kid)));
            }
            Ok(key)
        })
    }

    /// Imports a PEM private key (PKCS#8, PKCS#1 or SEC1, as warrant's key files hold them)
    /// into the token as a non-extractable, sensitive key with `id` and `label`, plus its public
    /// key, so a cluster can move an existing key (kubeadm's `sa.key`) into the HSM without
    /// breaking a token it signed. Refuses an `id` already in use; leaves no object behind on
    /// failure. The PEM's bytes are not kept. Blocks.
    pub fn import_pem(&self, pem: &[u8], id: &[u8], label: &str) -> Result<HsmKey, HsmError> {
        let signing = pem_private_key(pem)?;
        let alg = signing.algorithm();
        let public_key = signing.verifying_key().clone();
        let (mut public, mut private) = key_attributes(&signing)?;
        public.push(Attribute::Class(ObjectClass::PUBLIC_KEY));
        public.extend(public_template(id, label));
        private.push(Attribute::Class(ObjectClass::PRIVATE_KEY));
        private.extend(private_template(id, label));
        let key_uri = self.inner.uri.with_object(id, Some(label));
        let key = self.call("import", |s, e| {
            self.refuse_taken_id(s, id, &key_uri)?;
            let pub_h = s
                .session
                .create_object(&public)
                .map_err(|e| HsmError::pkcs11(&key_uri, "C_CreateObject (public key)", e))?;
            let priv_h = match s.session.create_object(&private) {
                Ok(h) => h,
                Err(e) => {
                    destroy_all(&s.session, &[pub_h]);
                    return Err(HsmError::pkcs11(
                        &key_uri,
                        "C_CreateObject (private key)",
                        e,
                    ));
                }
            };
            self.finish_new_key(e, s, &key_uri, id, Some(alg), &[pub_h, priv_h])
        })?;
        debug_assert_eq!(key.verifying_key(), &public_key);
        Ok(key)
    }

    fn refuse_taken_id(&self, s: &Pooled, id: &[u8], key_uri: &Pkcs11Uri) -> Result<(), HsmError> {
        let taken = s
            .session
            .find_objects(&[Attribute::Id(id.to_vec())])
            .map_err(|e| HsmError::pkcs11(key_uri, "C_FindObjects", e))?;
        if taken.is_empty() {
            Ok(())
        } else {
            Err(HsmError::ObjectExists {
                uri: key_uri.to_string(),
            })
        }
    }

    /// After a key's objects exist: check and load it; destroy them if that fails.
    fn finish_new_key(
        &self,
        e: &Entered<'_>,
        s: &mut Pooled,
        key_uri: &Pkcs11Uri,
        id: &[u8],
        expected: Option<Algorithm>,
        created: &[ObjectHandle],
    ) -> Result<HsmKey, HsmError> {
        #[cfg(feature = "fault-injection")]
        if crate::fault::fail_after_create() {
            destroy_all(&s.session, created);
            return Err(HsmError::ImportUnsupported(
                "injected failure after the objects were created",
            ));
        }
        match self.load_key(e, s, key_uri, id, expected, None) {
            Ok(key) => Ok(key),
            Err(err) => {
                destroy_all(&s.session, created);
                s.handles.remove(id);
                Err(err)
            }
        }
    }
}

/// The first private key in `pem` (PKCS#8, PKCS#1 or SEC1).
fn pem_private_key(pem: &[u8]) -> Result<SigningKey, HsmError> {
    warrant_token::parse_pem_keys(pem)
        .map_err(HsmError::Import)?
        .into_iter()
        .find_map(|k| match k {
            PemKey::Private(k) => Some(k),
            PemKey::Public(_) => None,
        })
        .ok_or(HsmError::ImportUnsupported("the PEM holds no private key"))
}

/// `signing`'s material as the attributes of its public and private objects: key type and
/// numbers, read from its PKCS#8 form. Class, id, label and flags are the caller's to add.
fn key_attributes(signing: &SigningKey) -> Result<(Vec<Attribute>, Vec<Attribute>), HsmError> {
    let alg = signing.algorithm();
    let pkcs8 = signing.to_pkcs8_pem().map_err(HsmError::Import)?;
    let pkcs8 = {
        use rustls_pki_types::pem::PemObject as _;
        rustls_pki_types::PrivatePkcs8KeyDer::from_pem_slice(pkcs8.as_str().as_bytes())
            .map_err(|_| HsmError::ImportUnsupported("the key does not re-encode as PKCS#8"))?
    };
    let pkcs8 = pkcs8.secret_pkcs8_der();
    match alg {
        Algorithm::RS256 => rsa_attributes(pkcs8),
        Algorithm::ES256 | Algorithm::ES384 | Algorithm::ES512 => {
            ec_attributes(alg, pkcs8, signing.verifying_key())
        }
    }
}

/// An RSA key's modulus and public exponent for both objects, its private numbers for the
/// private one.
fn rsa_attributes(pkcs8: &[u8]) -> Result<(Vec<Attribute>, Vec<Attribute>), HsmError> {
    let c = der::rsa_components(pkcs8)
        .ok_or(HsmError::ImportUnsupported("the RSA key has no components"))?;
    let public = vec![
        Attribute::KeyType(CkKeyType::RSA),
        Attribute::Modulus(c.n.clone()),
        Attribute::PublicExponent(c.e.clone()),
    ];
    let private = vec![
        Attribute::KeyType(CkKeyType::RSA),
        Attribute::Modulus(c.n),
        Attribute::PublicExponent(c.e),
        Attribute::PrivateExponent(c.d),
        Attribute::Prime1(c.p),
        Attribute::Prime2(c.q),
        Attribute::Exponent1(c.dp),
        Attribute::Exponent2(c.dq),
        Attribute::Coefficient(c.qinv),
    ];
    Ok((public, private))
}

/// An EC key's curve for both objects, its public point (from `public_key`) for the public
/// one and its private scalar for the private one.
fn ec_attributes(
    alg: Algorithm,
    pkcs8: &[u8],
    public_key: &VerifyingKey,
) -> Result<(Vec<Attribute>, Vec<Attribute>), HsmError> {
    let params = der::ec_params(alg)
        .ok_or(HsmError::ImportUnsupported("unknown curve"))?
        .to_vec();
    let len = der::coordinate_len(alg).unwrap_or_default();
    let spki = public_key.spki_der();
    let point =
        spki.get(spki.len().saturating_sub(2 * len + 1)..)
            .ok_or(HsmError::ImportUnsupported(
                "the EC public key is malformed",
            ))?;
    let scalar = der::ec_private_scalar(pkcs8).ok_or(HsmError::ImportUnsupported(
        "the EC key has no private scalar",
    ))?;
    let public = vec![
        Attribute::KeyType(CkKeyType::EC),
        Attribute::EcParams(params.clone()),
        Attribute::EcPoint(der::octet_string(point)),
    ];
    let private = vec![
        Attribute::KeyType(CkKeyType::EC),
        Attribute::EcParams(params),
        Attribute::Value(scalar),
    ];
    Ok((public, private))
}

fn destroy_all(session: &Session, handles: &[ObjectHandle]) {
    for &h in handles {
        if let Err(err) = session.destroy_object(h) {
            tracing::error!(error = %err, "could not destroy a key object after a failed creation");
        }
    }
}
