//! RFC 7512 PKCS#11 URIs: which module, which token, which object, and where the PIN comes from.
//!
//! `pkcs11:token=warrant;id=%01%02?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/pin`
//!
//! The URI comes from the operator (a flag or a configuration file), but it is also printed in
//! errors and logs, so it must never carry the PIN: `pin-value` is refused (see
//! [`UriError::PinValue`]). The PIN comes from a file (`pin-source=file:`) or from an
//! environment variable named separately ([`crate::PinSource`]).
//!
//! Attributes warrant does not understand are refused rather than ignored: RFC 7512 says a URI
//! with an attribute the consumer does not understand matches nothing, and silently matching a
//! different token than the operator meant is the worst outcome for a key store.

use std::fmt;
use std::path::PathBuf;

/// What a `type=` attribute names. warrant only uses key objects; the others parse so the error
/// can say what was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectType {
    /// `type=private`: a private key.
    Private,
    /// `type=public`: a public key.
    Public,
    /// `type=cert`: a certificate.
    Cert,
    /// `type=secret-key`: a secret (symmetric) key.
    SecretKey,
    /// `type=data`: a data object.
    Data,
}

impl ObjectType {
    fn name(self) -> &'static str {
        match self {
            ObjectType::Private => "private",
            ObjectType::Public => "public",
            ObjectType::Cert => "cert",
            ObjectType::SecretKey => "secret-key",
            ObjectType::Data => "data",
        }
    }
}

/// A parsed PKCS#11 URI. Its `Display` is the canonical URI (percent-encoded, attributes in a
/// fixed order); it never contains a PIN, because a URI with one does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pkcs11Uri {
    token: Option<String>,
    manufacturer: Option<String>,
    model: Option<String>,
    serial: Option<String>,
    slot_id: Option<u64>,
    object: Option<String>,
    id: Option<Vec<u8>>,
    object_type: Option<ObjectType>,
    module_path: Option<PathBuf>,
    pin_source: Option<PathBuf>,
}

/// Why a PKCS#11 URI was refused. Messages name the attribute, never the whole URI text (which
/// might hold a PIN the operator pasted by mistake).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UriError {
    /// The text does not start with `pkcs11:`.
    #[error("a PKCS#11 URI starts with \"pkcs11:\"")]
    Scheme,
    /// An attribute without `=`: its name when it is one RFC 7512 or warrant knows, else
    /// `None` (its text may be a PIN, and is not repeated).
    #[error("{}", no_value(.0.as_deref()))]
    NoValue(Option<String>),
    /// A `%` not followed by two hex digits.
    #[error(
        "PKCS#11 URI attribute {0:?}: bad percent-encoding (a % must be followed by two hex digits)"
    )]
    Percent(String),
    /// A text attribute whose decoded bytes are not UTF-8.
    #[error("PKCS#11 URI attribute {0:?} is not UTF-8 after percent-decoding")]
    NotUtf8(String),
    /// The same attribute twice.
    #[error("PKCS#11 URI attribute {0:?} appears more than once")]
    Duplicate(String),
    /// An empty value where one is needed.
    #[error("PKCS#11 URI attribute {0:?} is empty")]
    Empty(String),
    /// An attribute warrant does not understand: its name when it is one of RFC 7512's or a
    /// vendor's (`x-…`), else `None` (the text may be a PIN, and is not repeated).
    #[error(
        "PKCS#11 URI attribute {} is not supported by warrant (it understands token, manufacturer, model, serial, slot-id, object, id, type, module-path and pin-source)",
        unknown(.0.as_deref())
    )]
    Unknown(Option<String>),
    /// `pin-value`: refused.
    #[error(
        "PKCS#11 URI attribute \"pin-value\" is refused: a PIN in a URI ends up on command lines, where other users read it in /proc/PID/cmdline and ps, and in shell history and logs; put the PIN in a file readable only by warrant and use pin-source=file:/path, or pass it in an environment variable"
    )]
    PinValue,
    /// A `pin-source` that is not a `file:` URI or an absolute path.
    #[error(
        "PKCS#11 URI pin-source must be file:/absolute/path (warrant reads the PIN from that file); other sources are not supported"
    )]
    PinSource,
    /// `module-name`: refused, since it needs p11-kit's registry.
    #[error(
        "PKCS#11 URI attribute \"module-name\" needs p11-kit's module registry, which warrant does not read: give module-path=/path/to/module.so"
    )]
    ModuleName,
    /// A `module-path` that is not absolute.
    #[error(
        "PKCS#11 URI module-path must be an absolute path (a relative one would be searched for by the dynamic loader)"
    )]
    ModulePath,
    /// `slot-id` that is not a decimal number.
    #[error("PKCS#11 URI slot-id must be a decimal number")]
    SlotId,
    /// `type=` with a value RFC 7512 does not define.
    #[error("PKCS#11 URI type must be private, public, cert, secret-key or data")]
    ObjectType,
    /// Nothing names the token.
    #[error(
        "the PKCS#11 URI must name the token (token=LABEL, or serial=…): warrant does not pick the first token it finds"
    )]
    NoToken,
}

/// The attribute names RFC 7512 defines, which an error may quote.
const RFC7512_ATTRIBUTES: [&str; 17] = [
    "token",
    "manufacturer",
    "model",
    "serial",
    "slot-id",
    "slot-description",
    "slot-manufacturer",
    "library-manufacturer",
    "library-description",
    "library-version",
    "object",
    "id",
    "type",
    "module-path",
    "module-name",
    "pin-source",
    "pin-value",
];

/// `name` if an error may quote it: one of RFC 7512's attributes, or a vendor's (`x-` and
/// letters, digits and `-`). Anything else may be a PIN typed in the wrong place.
fn quotable(name: &str) -> Option<String> {
    let vendor = name.strip_prefix("x-").is_some_and(|rest| {
        !rest.is_empty()
            && rest.len() <= 32
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    });
    (vendor || RFC7512_ATTRIBUTES.contains(&name)).then(|| name.to_owned())
}

fn no_value(name: Option<&str>) -> String {
    match name {
        Some(name) => format!("PKCS#11 URI attribute {name:?} has no value (name=value)"),
        None => "a PKCS#11 URI attribute has no value (name=value); it is not repeated here, since it may hold a PIN".into(),
    }
}

fn unknown(name: Option<&str>) -> String {
    match name {
        Some(name) => format!("{name:?}"),
        None => "(not repeated here: it is not an RFC 7512 name, and may hold a PIN)".into(),
    }
}

impl Pkcs11Uri {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Self, UriError> {
        let rest = text
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("pkcs11:"))
            .and_then(|_| text.get(7..))
            .ok_or(UriError::Scheme)?;
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        let mut uri = Pkcs11Uri::default();
        for attr in path.split(';').filter(|a| !a.is_empty()) {
            let (name, value) = split_attr(attr)?;
            uri.set_path_attribute(name, value)?;
        }
        for attr in query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter(|a| !a.is_empty())
        {
            let (name, value) = split_attr(attr)?;
            uri.set_query_attribute(name, value)?;
        }
        if uri.token.is_none() && uri.serial.is_none() {
            return Err(UriError::NoToken);
        }
        Ok(uri)
    }

    /// Sets the path attribute `name` (which token, which object) to its encoded `value`.
    fn set_path_attribute(&mut self, name: &str, value: &str) -> Result<(), UriError> {
        match name {
            "token" => set(&mut self.token, name, text_value(name, value)?),
            "manufacturer" => set(&mut self.manufacturer, name, text_value(name, value)?),
            "model" => set(&mut self.model, name, text_value(name, value)?),
            "serial" => set(&mut self.serial, name, text_value(name, value)?),
            "object" => set(&mut self.object, name, text_value(name, value)?),
            "id" => {
                let id = decode(name, value)?;
                if id.is_empty() {
                    return Err(UriError::Empty(name.to_owned()));
                }
                set(&mut self.id, name, id)
            }
            "slot-id" => {
                let v = text_value(name, value)?;
                let n = v.parse::<u64>().map_err(|_| UriError::SlotId)?;
                set(&mut self.slot_id, name, n)
            }
            "type" => {
                let t = match text_value(name, value)?.as_str() {
                    "private" => ObjectType::Private,
                    "public" => ObjectType::Public,
                    "cert" => ObjectType::Cert,
                    "secret-key" => ObjectType::SecretKey,
                    "data" => ObjectType::Data,
                    _ => return Err(UriError::ObjectType),
                };
                set(&mut self.object_type, name, t)
            }
            "pin-value" => Err(UriError::PinValue),
            other => Err(UriError::Unknown(quotable(other))),
        }
    }

    /// Sets the query attribute `name` (the module, where the PIN is) to its encoded `value`.
    fn set_query_attribute(&mut self, name: &str, value: &str) -> Result<(), UriError> {
        match name {
            "pin-value" => Err(UriError::PinValue),
            "module-name" => Err(UriError::ModuleName),
            "module-path" => {
                let path = PathBuf::from(text_value(name, value)?);
                if !path.is_absolute() {
                    return Err(UriError::ModulePath);
                }
                set(&mut self.module_path, name, path)
            }
            "pin-source" => {
                let v = text_value(name, value)?;
                let path = v
                    .strip_prefix("file://")
                    .or_else(|| v.strip_prefix("file:"))
                    .unwrap_or(&v);
                let path = PathBuf::from(path);
                if !path.is_absolute() {
                    return Err(UriError::PinSource);
                }
                set(&mut self.pin_source, name, path)
            }
            other => Err(UriError::Unknown(quotable(other))),
        }
    }

    /// The token label (`token=`), if given.
    pub fn token_label(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The token serial number (`serial=`), if given.
    pub fn serial(&self) -> Option<&str> {
        self.serial.as_deref()
    }

    /// The object label (`object=`), if given: the label of one key.
    pub fn object_label(&self) -> Option<&str> {
        self.object.as_deref()
    }

    /// The object's `CKA_ID` (`id=`), decoded, if given.
    pub fn object_id(&self) -> Option<&[u8]> {
        self.id.as_deref()
    }

    /// The object type (`type=`), if given.
    pub fn object_type(&self) -> Option<ObjectType> {
        self.object_type
    }

    /// The module (`module-path=`), if given.
    pub fn module_path(&self) -> Option<&std::path::Path> {
        self.module_path.as_deref()
    }

    /// The PIN file (`pin-source=file:`), if given.
    pub fn pin_source(&self) -> Option<&std::path::Path> {
        self.pin_source.as_deref()
    }

    /// True when a token with these properties is the one this URI names. Only the attributes
    /// present are compared; labels are compared after the padding PKCS#11 adds is removed.
    pub fn matches_token(
        &self,
        label: &str,
        manufacturer: &str,
        model: &str,
        serial: &str,
    ) -> bool {
        let eq = |want: &Option<String>, have: &str| {
            want.as_deref()
                .is_none_or(|w| w == have.trim_end_matches(' '))
        };
        eq(&self.token, label)
            && eq(&self.manufacturer, manufacturer)
            && eq(&self.model, model)
            && eq(&self.serial, serial)
    }

    /// The slot (`slot-id=`), if given.
    pub fn slot_id(&self) -> Option<u64> {
        self.slot_id
    }

    /// The URI of the token alone (no object, no query): how errors and health name the token.
    pub fn token_uri(&self) -> Pkcs11Uri {
        Pkcs11Uri {
            token: self.token.clone(),
            manufacturer: self.manufacturer.clone(),
            model: self.model.clone(),
            serial: self.serial.clone(),
            slot_id: self.slot_id,
            ..Pkcs11Uri::default()
        }
    }

    /// This URI's token, with the object `id` (and `label`, if any) of one key: how errors name
    /// a key.
    pub fn with_object(&self, id: &[u8], label: Option<&str>) -> Pkcs11Uri {
        Pkcs11Uri {
            id: Some(id.to_vec()),
            object: label.map(str::to_owned),
            ..self.token_uri()
        }
    }
}

impl Pkcs11Uri {
    /// Where the private key `id` on this URI's token is, as a key store records it:
    /// `pkcs11:token=warrant;type=private;id=%0A%1B`. It names the token as this URI does, less
    /// `slot-id` (slot numbers change when devices are added), and carries nothing secret and
    /// nothing host-specific (no PIN source, no module path).
    pub fn key_locator(&self, id: &[u8]) -> Pkcs11Uri {
        Pkcs11Uri {
            slot_id: None,
            id: Some(id.to_vec()),
            object_type: Some(ObjectType::Private),
            ..self.token_uri()
        }
    }

    /// False when this URI and `other` name different tokens: an attribute both give
    /// (label, serial, manufacturer, model) differs. A locator recorded by one token is never
    /// looked up on another.
    pub fn same_token(&self, other: &Pkcs11Uri) -> bool {
        let agree = |a: &Option<String>, b: &Option<String>| match (a, b) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        agree(&self.token, &other.token)
            && agree(&self.serial, &other.serial)
            && agree(&self.manufacturer, &other.manufacturer)
            && agree(&self.model, &other.model)
    }
}

impl std::str::FromStr for Pkcs11Uri {
    type Err = UriError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Pkcs11Uri::parse(s)
    }
}

impl fmt::Display for Pkcs11Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("pkcs11:")?;
        let mut sep = "";
        let mut path = |f: &mut fmt::Formatter<'_>, name: &str, value: &[u8]| {
            let r = write!(f, "{sep}{name}={}", Encoded(value));
            sep = ";";
            r
        };
        if let Some(v) = &self.token {
            path(f, "token", v.as_bytes())?;
        }
        if let Some(v) = &self.manufacturer {
            path(f, "manufacturer", v.as_bytes())?;
        }
        if let Some(v) = &self.model {
            path(f, "model", v.as_bytes())?;
        }
        if let Some(v) = &self.serial {
            path(f, "serial", v.as_bytes())?;
        }
        if let Some(v) = self.slot_id {
            path(f, "slot-id", v.to_string().as_bytes())?;
        }
        if let Some(v) = &self.object {
            path(f, "object", v.as_bytes())?;
        }
        if let Some(v) = self.object_type {
            path(f, "type", v.name().as_bytes())?;
        }
        if let Some(v) = &self.id {
            // Every byte escaped: an id is binary, and %01%02 is how tools print it.
            write!(f, "{sep}id=")?;
            for b in v {
                write!(f, "%{b:02X}")?;
            }
        }
        let mut sep = "?";
        if let Some(p) = &self.module_path {
            write!(
                f,
                "{sep}module-path={}",
                Encoded(p.as_os_str().as_encoded_bytes())
            )?;
            sep = "&";
        }
        if let Some(p) = &self.pin_source {
            write!(
                f,
                "{sep}pin-source=file:{}",
                Encoded(p.as_os_str().as_encoded_bytes())
            )?;
        }
        Ok(())
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters and `/` (paths stay legible).
struct Encoded<'a>(&'a [u8]);

impl fmt::Display for Encoded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &b in self.0 {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
                write!(f, "{}", char::from(b))?;
            } else {
                write!(f, "%{b:02X}")?;
            }
        }
        Ok(())
    }
}

/// `name=value`. An attribute that starts as `pin-value` is refused as such whatever follows
/// (`pin-value:1234`, `pin-value%3D1234`): nothing after it is ever quoted.
fn split_attr(attr: &str) -> Result<(&str, &str), UriError> {
    match attr.split_once('=') {
        Some(("pin-value", _)) => Err(UriError::PinValue),
        _ if attr.starts_with("pin-value") => Err(UriError::PinValue),
        Some(pair) => Ok(pair),
        None => Err(UriError::NoValue(quotable(attr))),
    }
}

fn set<T>(slot: &mut Option<T>, name: &str, value: T) -> Result<(), UriError> {
    if slot.is_some() {
        return Err(UriError::Duplicate(name.to_owned()));
    }
    *slot = Some(value);
    Ok(())
}

fn text_value(name: &str, value: &str) -> Result<String, UriError> {
    let bytes = decode(name, value)?;
    if bytes.is_empty() {
        return Err(UriError::Empty(name.to_owned()));
    }
    String::from_utf8(bytes).map_err(|_| UriError::NotUtf8(name.to_owned()))
}

/// Strict percent-decoding: every `%` starts a two-hex-digit escape.
fn decode(name: &str, value: &str) -> Result<Vec<u8>, UriError> {
    let bad = || UriError::Percent(name.to_owned());
    let mut out = Vec::with_capacity(value.len());
    let mut bytes = value.bytes();
    while let Some(b) = bytes.next() {
        if b == b'%' {
            let hi = bytes.next().and_then(hex).ok_or_else(bad)?;
            let lo = bytes.next().and_then(hex).ok_or_else(bad)?;
            out.push(hi << 4 | lo);
        } else {
            out.push(b);
        }
    }
    Ok(out)
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_supported_attribute() {
        let uri = Pkcs11Uri::parse(
            "pkcs11:token=My%20Token;manufacturer=SoftHSM%20project;model=SoftHSM%20v2;serial=abc123;slot-id=7;object=warrant-key;id=%01%02%ff;type=private?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin",
        )
        .unwrap();
        assert_eq!(uri.token_label(), Some("My Token"));
        assert_eq!(uri.serial(), Some("abc123"));
        assert_eq!(uri.slot_id(), Some(7));
        assert_eq!(uri.object_label(), Some("warrant-key"));
        assert_eq!(uri.object_id(), Some(&[1u8, 2, 0xff][..]));
        assert_eq!(uri.object_type(), Some(ObjectType::Private));
        assert_eq!(
            uri.module_path(),
            Some(std::path::Path::new("/usr/lib/softhsm/libsofthsm2.so"))
        );
        assert_eq!(
            uri.pin_source(),
            Some(std::path::Path::new("/run/secrets/pin"))
        );
        assert!(uri.matches_token("My Token   ", "SoftHSM project", "SoftHSM v2", "abc123"));
        assert!(!uri.matches_token("My Token", "SoftHSM project", "SoftHSM v2", "abc124"));
    }

    #[test]
    fn display_round_trips_and_escapes() {
        let text = "pkcs11:token=a%3Bb%20c;object=k;id=%01%AB?module-path=/opt/hsm/lib%20x.so&pin-source=file:/run/pin";
        let uri = Pkcs11Uri::parse(text).unwrap();
        assert_eq!(uri.to_string(), text);
        assert_eq!(uri.token_label(), Some("a;b c"));
        assert_eq!(Pkcs11Uri::parse(&uri.to_string()).unwrap(), uri);
        assert_eq!(uri.token_uri().to_string(), "pkcs11:token=a%3Bb%20c");
        assert_eq!(
            uri.with_object(&[9], None).to_string(),
            "pkcs11:token=a%3Bb%20c;id=%09"
        );
    }

    #[test]
    fn key_locators_carry_no_secret_and_round_trip() {
        let configured = Pkcs11Uri::parse(
            "pkcs11:token=warrant;slot-id=3;id=%09?module-path=/usr/lib/x.so&pin-source=file:/run/pin",
        )
        .unwrap();
        let locator = configured.key_locator(&[0x0a, 0x1b, 0xff]);
        assert_eq!(
            locator.to_string(),
            "pkcs11:token=warrant;type=private;id=%0A%1B%FF"
        );
        let parsed = Pkcs11Uri::parse(&locator.to_string()).unwrap();
        assert_eq!(parsed, locator);
        assert_eq!(parsed.object_id(), Some(&[0x0a, 0x1b, 0xff][..]));
        assert!(parsed.same_token(&configured));
        let other = Pkcs11Uri::parse("pkcs11:token=other").unwrap();
        assert!(!parsed.same_token(&other));
        let by_serial = Pkcs11Uri::parse("pkcs11:serial=42").unwrap();
        assert!(
            parsed.same_token(&by_serial),
            "nothing to compare: not refused"
        );
    }

    #[test]
    fn pin_source_forms() {
        for text in [
            "pkcs11:token=t?pin-source=file:/p",
            "pkcs11:token=t?pin-source=file:///p",
            "pkcs11:token=t?pin-source=/p",
            "pkcs11:token=t?pin-source=file:%2Fp",
        ] {
            let uri = Pkcs11Uri::parse(text).unwrap();
            assert_eq!(uri.pin_source(), Some(std::path::Path::new("/p")), "{text}");
        }
    }

    #[test]
    fn scheme_is_case_insensitive_and_serial_alone_names_a_token() {
        assert!(Pkcs11Uri::parse("PKCS11:token=t").is_ok());
        assert_eq!(
            Pkcs11Uri::parse("pkcs11:serial=1").unwrap().serial(),
            Some("1")
        );
    }

    #[test]
    fn refusals() {
        let cases: &[(&str, UriError)] = &[
            ("token=t", UriError::Scheme),
            ("pkcs1:token=t", UriError::Scheme),
            ("", UriError::Scheme),
            ("pkcs11:", UriError::NoToken),
            ("pkcs11:object=k;id=%01", UriError::NoToken),
            ("pkcs11:token", UriError::NoValue(Some("token".into()))),
            ("pkcs11:token=%2", UriError::Percent("token".into())),
            ("pkcs11:token=%zz", UriError::Percent("token".into())),
            ("pkcs11:token=t;id=%0g", UriError::Percent("id".into())),
            ("pkcs11:token=%ff", UriError::NotUtf8("token".into())),
            (
                "pkcs11:token=a;token=b",
                UriError::Duplicate("token".into()),
            ),
            ("pkcs11:token=", UriError::Empty("token".into())),
            ("pkcs11:token=t;id=", UriError::Empty("id".into())),
            (
                "pkcs11:token=t;library-version=1",
                UriError::Unknown(Some("library-version".into())),
            ),
            (
                "pkcs11:token=t?x-vendor=1",
                UriError::Unknown(Some("x-vendor".into())),
            ),
            ("pkcs11:token=t;pin-value=1234", UriError::PinValue),
            ("pkcs11:token=t?pin-value=1234", UriError::PinValue),
            ("pkcs11:token=t?pin-source=|/bin/cat", UriError::PinSource),
            ("pkcs11:token=t?pin-source=pin.txt", UriError::PinSource),
            ("pkcs11:token=t?pin-source=env:PIN", UriError::PinSource),
            ("pkcs11:token=t?module-name=softhsm2", UriError::ModuleName),
            (
                "pkcs11:token=t?module-path=libsofthsm2.so",
                UriError::ModulePath,
            ),
            ("pkcs11:token=t;slot-id=x", UriError::SlotId),
            ("pkcs11:token=t;type=secret", UriError::ObjectType),
            (
                "pkcs11:token=t?module-path=/a&module-path=/b",
                UriError::Duplicate("module-path".into()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Pkcs11Uri::parse(text).as_ref(), Err(want), "{text:?}");
        }
    }

    #[test]
    fn the_pin_never_appears_in_an_error() {
        for text in [
            "pkcs11:token=t;pin-value=s3cret",
            "pkcs11:token=t?pin-value=s3cret",
            "pkcs11:token=t?pin-value=s3cret&module-path=x",
        ] {
            let err = Pkcs11Uri::parse(text).unwrap_err();
            assert_eq!(err, UriError::PinValue);
            assert!(!err.to_string().contains("s3cret"));
        }
        // A PIN typed with the wrong separator, or where a name goes: the attribute is named
        // when it is one RFC 7512 defines, and nothing else of it is repeated.
        for (text, want) in [
            ("pkcs11:token=t;pin-value:s3cret", UriError::PinValue),
            ("pkcs11:token=t?pin-value%3Ds3cret", UriError::PinValue),
            ("pkcs11:token=t;pin-values3cret=1", UriError::PinValue),
            ("pkcs11:token=t;s3cret", UriError::NoValue(None)),
            ("pkcs11:token=t;s3cret=1", UriError::Unknown(None)),
            ("pkcs11:token=t?x-s3cret:1=1", UriError::Unknown(None)),
        ] {
            let err = Pkcs11Uri::parse(text).unwrap_err();
            assert_eq!(err, want, "{text}");
            let said = err.to_string();
            assert!(!said.contains("s3cret"), "{text}: {said}");
        }
        let err = Pkcs11Uri::parse(&format!("pkcs11:token=t;{}", "x".repeat(100))).unwrap_err();
        assert!(!err.to_string().contains("xxx"), "{err}");
    }
}
