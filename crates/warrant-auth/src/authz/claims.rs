//! The policy's `claims` section: claims beyond kube's, added to the tokens of the audiences it
//! names, with values made only from facts warrant has verified (docs/tokens.md, "Extra
//! claims").
//!
//! ```yaml
//! claims:
//!   - audiences: ["sts.amazonaws.com"]        # globs, as in a rule; every audience of the token
//!     labelPrefix: abac.warrant.dev/          # pod labels ${pod.labels.X} may name: <prefix>X
//!     annotationPrefix: abac.warrant.dev/     # service-account annotations, likewise
//!     ifMissing: refuse                       # or omit: a fact the token's subject lacks
//!     set:
//!       cluster: ${cluster}
//!       team: {value: "${pod.labels.team}", ifMissing: omit}
//!     awsSessionTags:                         # https://aws.amazon.com/tags
//!       principalTags:
//!         namespace: ${namespace}
//!         team: {value: "${pod.labels.team}", ifMissing: omit}
//!       transitiveTagKeys: [namespace]
//! ```
//!
//! **The template language** is text with whole placeholders, `${fact}`, and nothing else: no
//! expressions, functions, defaults or conditions (`$$` is a literal `$`). A value can be read at
//! a glance and checked when the policy loads, and what a token says can be worked out from the
//! objects without running anything. The facts, and who can write each:
//!
//! | placeholder | fact | written by |
//! |---|---|---|
//! | `${namespace}` | the service account's namespace | the URL, authorized |
//! | `${serviceAccount.name}`, `${serviceAccount.uid}` | the service account | the cluster |
//! | `${serviceAccount.annotations.X}` | annotation `<annotationPrefix>X` of the service account | whoever may edit service accounts in the namespace |
//! | `${pod.name}`, `${pod.uid}`, `${pod.node}` | the bound pod, its node | the cluster (the scheduler) |
//! | `${pod.labels.X}` | label `<labelPrefix>X` of the bound pod | whoever may create pods in the namespace |
//! | `${cluster}` | `--cluster-name` | the operator |
//!
//! Nothing comes from the request's body or headers. The prefixes must lie in warrant's domain
//! (`warrant.dev/` or `<sub>.warrant.dev/`): those are the only annotations and labels the
//! object cache keeps (so it never holds what other tools keep elsewhere), and an operator who
//! names one chooses, object by object, what relying parties may see.
//!
//! What this trusts: the policy file, and the cache of objects. Costs: a token for an audience
//! no entry names pays one look at an empty list; one that an entry names, the rendering (a
//! few allocations per claim) and a payload written through a `serde_json::Value`.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_saphyr::Spanned;
use warrant_token::{AWS_TAGS_CLAIM, AwsTagError, ExtraClaims, is_reserved_claim};

use super::glob::Glob;

/// What to do when a value's fact is missing (a label the pod does not carry, a pod for a token
/// bound to none, `${cluster}` without `--cluster-name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum IfMissing {
    /// The token is refused (403), naming the claim and the fact.
    #[default]
    Refuse,
    /// The claim (or session tag) is left out.
    Omit,
}

/// A fact a placeholder names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// `${namespace}`.
    Namespace,
    /// `${cluster}`.
    Cluster,
    /// `${serviceAccount.name}`.
    ServiceAccountName,
    /// `${serviceAccount.uid}`.
    ServiceAccountUid,
    /// `${serviceAccount.annotations.X}`: X, after the entry's annotation prefix.
    ServiceAccountAnnotation(String),
    /// `${pod.name}`.
    PodName,
    /// `${pod.uid}`.
    PodUid,
    /// `${pod.node}`.
    PodNode,
    /// `${pod.labels.X}`: X, after the entry's label prefix.
    PodLabel(String),
}

impl fmt::Display for Fact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fact::Namespace => f.write_str("namespace"),
            Fact::Cluster => f.write_str("cluster"),
            Fact::ServiceAccountName => f.write_str("serviceAccount.name"),
            Fact::ServiceAccountUid => f.write_str("serviceAccount.uid"),
            Fact::ServiceAccountAnnotation(x) => write!(f, "serviceAccount.annotations.{x}"),
            Fact::PodName => f.write_str("pod.name"),
            Fact::PodUid => f.write_str("pod.uid"),
            Fact::PodNode => f.write_str("pod.node"),
            Fact::PodLabel(x) => write!(f, "pod.labels.{x}"),
        }
    }
}

impl Fact {
    fn parse(name: &str) -> Result<Fact, String> {
        let suffix = |rest: &str| -> Result<String, String> {
            let ok = !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if ok {
                Ok(rest.to_owned())
            } else {
                Err(format!(
                    "${{{name}}}: the name after the prefix must be letters, digits, '-', '_' or '.'"
                ))
            }
        };
        Ok(match name {
            "namespace" => Fact::Namespace,
            "cluster" => Fact::Cluster,
            "serviceAccount.name" => Fact::ServiceAccountName,
            "serviceAccount.uid" => Fact::ServiceAccountUid,
            "pod.name" => Fact::PodName,
            "pod.uid" => Fact::PodUid,
            "pod.node" => Fact::PodNode,
            _ => {
                if let Some(rest) = name.strip_prefix("serviceAccount.annotations.") {
                    Fact::ServiceAccountAnnotation(suffix(rest)?)
                } else if let Some(rest) = name.strip_prefix("pod.labels.") {
                    Fact::PodLabel(suffix(rest)?)
                } else {
                    return Err(format!(
                        "${{{name}}} is not a fact warrant knows (namespace, cluster, serviceAccount.name, serviceAccount.uid, serviceAccount.annotations.X, pod.name, pod.uid, pod.node, pod.labels.X)"
                    ));
                }
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Fact(Fact),
}

/// A value: text with `${fact}` placeholders, parsed when the policy loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

impl Template {
    /// Parses `text`: `${fact}` is a placeholder, `$$` a literal `$`; any other `$` is an error,
    /// so that a typo never passes as text.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            literal.push_str(rest.get(..at).unwrap_or_default());
            let after = rest.get(at + 1..).unwrap_or_default();
            if let Some(tail) = after.strip_prefix('$') {
                literal.push('$');
                rest = tail;
            } else if let Some(open) = after.strip_prefix('{') {
                let Some(close) = open.find('}') else {
                    return Err(format!("{text:?}: a placeholder \"${{\" is not closed"));
                };
                let name = open.get(..close).unwrap_or_default();
                let fact = Fact::parse(name.trim())?;
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Fact(fact));
                rest = open.get(close + 1..).unwrap_or_default();
            } else {
                return Err(format!(
                    "{text:?}: '$' begins a placeholder ${{fact}}; write $$ for a literal '$'"
                ));
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Template { pieces })
    }

    fn facts(&self) -> impl Iterator<Item = &Fact> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Fact(f) => Some(f),
            Piece::Text(_) => None,
        })
    }

    /// The text without its placeholders: what the value holds whatever the facts.
    fn literal_text(&self) -> String {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Text(t) => Some(t.as_str()),
                Piece::Fact(_) => None,
            })
            .collect()
    }

    /// The value for `facts`, or the first fact missing.
    fn render(&self, facts: &Facts<'_>, prefixes: &Prefixes) -> Result<String, Fact> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Fact(fact) => {
                    out.push_str(facts.get(fact, prefixes).ok_or_else(|| fact.clone())?);
                }
            }
        }
        Ok(out)
    }
}

impl<'de> Deserialize<'de> for Template {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Template::parse(&text).map_err(de::Error::custom)
    }
}

/// A claim's (or a session tag's) value: a template, or `{value, ifMissing}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueSpec {
    /// The template.
    pub value: Template,
    /// This value's own choice; else the entry's.
    pub if_missing: Option<IfMissing>,
}

impl<'de> Deserialize<'de> for ValueSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpecVisitor;
        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = ValueSpec;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a template string, or a mapping with value and ifMissing")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<ValueSpec, E> {
                Ok(ValueSpec {
                    value: Template::parse(text).map_err(E::custom)?,
                    if_missing: None,
                })
            }

            // YAML reads `987654` or `true` as a number or a boolean: the value is its text.
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<ValueSpec, E> {
                self.visit_str(&n.to_string())
            }

            fn visit_i64<E: de::Error>(self, n: i64) -> Result<ValueSpec, E> {
                self.visit_str(&n.to_string())
            }

            fn visit_bool<E: de::Error>(self, b: bool) -> Result<ValueSpec, E> {
                self.visit_str(if b { "true" } else { "false" })
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ValueSpec, A::Error> {
                let mut value = None;
                let mut if_missing = None;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "value" => value = Some(map.next_value::<Template>()?),
                        "ifMissing" => if_missing = Some(map.next_value::<IfMissing>()?),
                        other => {
                            return Err(de::Error::unknown_field(other, &["value", "ifMissing"]));
                        }
                    }
                }
                Ok(ValueSpec {
                    value: value.ok_or_else(|| de::Error::missing_field("value"))?,
                    if_missing,
                })
            }
        }
        deserializer.deserialize_any(SpecVisitor)
    }
}

/// The recipe for AWS's session tags: the claim `https://aws.amazon.com/tags`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AwsSessionTags {
    /// Tag key to value (`principal_tags`, each written as a list of its one value).
    pub principal_tags: BTreeMap<String, Spanned<ValueSpec>>,
    /// Keys of tags that persist through role chaining (`transitive_tag_keys`); a key whose tag
    /// is omitted is left out too.
    #[serde(default)]
    pub transitive_tag_keys: Vec<String>,
}

/// One entry of the `claims` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimsEntry {
    /// The audiences (globs) whose tokens get these claims. A token gets them only if every one
    /// of its audiences matches; a token for some of them and others is refused.
    pub audiences: Vec<Glob>,
    /// `${serviceAccount.annotations.X}` reads the annotation `<prefix>X`.
    #[serde(default)]
    pub annotation_prefix: Option<Spanned<String>>,
    /// `${pod.labels.X}` reads the label `<prefix>X`.
    #[serde(default)]
    pub label_prefix: Option<Spanned<String>>,
    /// For values that do not say: refuse the token, or leave the claim out.
    #[serde(default)]
    pub if_missing: IfMissing,
    /// Claims by name.
    #[serde(default)]
    pub set: BTreeMap<String, Spanned<ValueSpec>>,
    /// AWS's session tags.
    #[serde(default)]
    pub aws_session_tags: Option<Spanned<AwsSessionTags>>,
    /// The tokens are SPIFFE JWT-SVIDs: `sub` is the service account's SPIFFE ID,
    /// `spiffe://<trust domain>/ns/<namespace>/sa/<name>`, and a token has one audience.
    #[serde(default)]
    pub jwt_svid: bool,
}

/// What the `claims` section gives a token: claims beyond kube's, and for a JWT-SVID its
/// subject.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenClaims {
    /// Claims beyond kube's; `None` if the entry makes none (or leaves every one out).
    pub extra: Option<ExtraClaims>,
    /// The `sub` that replaces kube's `system:serviceaccount:<namespace>:<name>`: the SPIFFE
    /// ID of a JWT-SVID.
    pub subject: Option<String>,
}

/// The SPIFFE ID of service account `namespace/name` in `trust_domain`, as a pod certificate's
/// URI SAN names it too.
pub fn spiffe_id(trust_domain: &str, namespace: &str, name: &str) -> String {
    format!("spiffe://{trust_domain}/ns/{namespace}/sa/{name}")
}

#[derive(Debug, Clone, Copy)]
struct Prefixes<'a> {
    annotation: &'a str,
    label: &'a str,
}

/// The verified facts a token's claims may be made of, borrowed from what TokenRequest already
/// looked up.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// `--cluster-name`, if given.
    pub cluster: Option<&'a str>,
    /// The service account's namespace.
    pub namespace: &'a str,
    /// The service account's name.
    pub service_account: &'a str,
    /// Its UID.
    pub service_account_uid: &'a str,
    /// Its annotations in warrant's domain, as the cache keeps them.
    pub annotations: &'a [(String, String)],
    /// The bound pod, for a pod-bound token.
    pub pod: Option<PodFacts<'a>>,
}

/// The bound pod's facts.
#[derive(Debug, Clone, Copy)]
pub struct PodFacts<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its UID.
    pub uid: &'a str,
    /// Its node; empty while unscheduled.
    pub node: &'a str,
    /// Its labels in warrant's domain, as the cache keeps them.
    pub labels: &'a [(String, String)],
}

fn lookup<'a>(pairs: &'a [(String, String)], prefix: &str, suffix: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| {
            k.len() == prefix.len() + suffix.len() && k.starts_with(prefix) && k.ends_with(suffix)
        })
        .map(|(_, v)| v.as_str())
}

impl<'a> Facts<'a> {
    fn get(&self, fact: &Fact, prefixes: &Prefixes<'_>) -> Option<&'a str> {
        match fact {
            Fact::Namespace => Some(self.namespace),
            Fact::Cluster => self.cluster.filter(|c| !c.is_empty()),
            Fact::ServiceAccountName => Some(self.service_account),
            Fact::ServiceAccountUid => Some(self.service_account_uid),
            Fact::ServiceAccountAnnotation(x) => lookup(self.annotations, prefixes.annotation, x),
            Fact::PodName => self.pod.map(|p| p.name),
            Fact::PodUid => self.pod.map(|p| p.uid),
            Fact::PodNode => self.pod.map(|p| p.node).filter(|n| !n.is_empty()),
            Fact::PodLabel(x) => self.pod.and_then(|p| lookup(p.labels, prefixes.label, x)),
        }
    }
}

/// Why a token's extra claims could not be made: the token is refused (403) with this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimsRefusal {
    /// A fact a value needs is missing, and the policy says to refuse.
    #[error(
        "the authorization policy sets the claim {claim:?} for the audience {audience:?} from {fact}, which {subject} does not have"
    )]
    Missing {
        /// The claim (or `https://aws.amazon.com/tags` tag `X`).
        claim: String,
        /// The audience.
        audience: String,
        /// `${fact}`.
        fact: String,
        /// `the service account`, `the bound pod`, `this token (bound to no pod)` or `warrant
        /// (no --cluster-name)`.
        subject: &'static str,
    },
    /// A session tag made of the facts is outside AWS's limits.
    #[error(
        "the authorization policy's session tags for the audience {audience:?} cannot be made: {source}"
    )]
    Aws {
        /// The audience.
        audience: String,
        /// What AWS would refuse.
        #[source]
        source: AwsTagError,
    },
    /// A JWT-SVID asked for with more than one audience.
    #[error(
        "the authorization policy makes tokens for the audience {audience:?} SPIFFE JWT-SVIDs, which have one audience: request a token for each of the {count} audiences apart"
    )]
    SvidAudiences {
        /// The audience whose entry makes JWT-SVIDs.
        audience: String,
        /// How many audiences the request named.
        count: usize,
    },
    /// The token's audiences are some that get claims and some that do not.
    #[error(
        "the authorization policy adds claims to tokens for the audience {claimed:?}, which the audience {other:?} is not named for: request a token for each apart"
    )]
    Mixed {
        /// An audience that gets claims.
        claimed: String,
        /// One that does not (by the same entry).
        other: String,
    },
}

fn prefix_text(prefix: &Option<Spanned<String>>) -> &str {
    prefix.as_ref().map_or("", |p| p.value.as_str())
}

impl ClaimsEntry {
    fn matches(&self, audience: &str) -> bool {
        self.audiences.iter().any(|g| g.matches(audience))
    }

    fn prefixes(&self) -> Prefixes<'_> {
        Prefixes {
            annotation: prefix_text(&self.annotation_prefix),
            label: prefix_text(&self.label_prefix),
        }
    }

    /// The value of `spec` for `facts`: `Ok(None)` to omit it.
    fn value(
        &self,
        claim: &str,
        audience: &str,
        spec: &ValueSpec,
        facts: &Facts<'_>,
    ) -> Result<Option<String>, ClaimsRefusal> {
        match spec.value.render(facts, &self.prefixes()) {
            Ok(value) => Ok(Some(value)),
            Err(_) if spec.if_missing.unwrap_or(self.if_missing) == IfMissing::Omit => Ok(None),
            Err(fact) => {
                let subject = match &fact {
                    Fact::Cluster => "warrant (no --cluster-name)",
                    Fact::ServiceAccountAnnotation(_) => "the service account",
                    _ if facts.pod.is_none() => "this token (bound to no pod)",
                    _ => "the bound pod",
                };
                Err(ClaimsRefusal::Missing {
                    claim: claim.to_owned(),
                    audience: audience.to_owned(),
                    fact: format!("${{{fact}}}"),
                    subject,
                })
            }
        }
    }

    /// The claims this entry makes for `facts`; `audience` names the token in refusals.
    pub fn render(&self, audience: &str, facts: &Facts<'_>) -> Result<ExtraClaims, ClaimsRefusal> {
        let mut claims = ExtraClaims::new();
        for (name, spec) in &self.set {
            if let Some(value) = self.value(name, audience, &spec.value, facts)? {
                claims.insert(name.clone(), Value::String(value));
            }
        }
        if let Some(aws) = &self.aws_session_tags {
            let mut tags = Vec::with_capacity(aws.value.principal_tags.len());
            for (key, spec) in &aws.value.principal_tags {
                let claim = format!("{AWS_TAGS_CLAIM} tag {key}");
                if let Some(value) = self.value(&claim, audience, &spec.value, facts)? {
                    tags.push((key.clone(), value));
                }
            }
            let transitive: Vec<String> = aws
                .value
                .transitive_tag_keys
                .iter()
                .filter(|k| tags.iter().any(|(key, _)| key == *k))
                .cloned()
                .collect();
            let claim = warrant_token::aws_session_tags(&tags, &transitive).map_err(|source| {
                ClaimsRefusal::Aws {
                    audience: audience.to_owned(),
                    source,
                }
            })?;
            if let Some(claim) = claim {
                claims.insert(AWS_TAGS_CLAIM.to_owned(), claim);
            }
        }
        Ok(claims)
    }
}

/// The extra claims of a token for `audiences`: `Ok(None)` when no entry names any of them
/// (every token kube's own clients ask for). The first entry that names one of the audiences
/// decides, and must name them all.
pub fn extra_claims(
    entries: &[Spanned<ClaimsEntry>],
    audiences: &[String],
    facts: &Facts<'_>,
) -> Result<Option<ExtraClaims>, ClaimsRefusal> {
    token_claims(entries, audiences, facts, DEFAULT_TRUST_DOMAIN).map(|t| t.and_then(|t| t.extra))
}

/// The trust domain of JWT-SVIDs when neither the policy's `podCertificates` section nor the
/// server names one: the pod certificates' default too.
pub const DEFAULT_TRUST_DOMAIN: &str = "cluster.local";

/// What the `claims` section gives a token for `audiences` ([`TokenClaims`]): `Ok(None)` when
/// no entry names any of them. The first entry that names one of the audiences decides, and
/// must name them all; one that makes JWT-SVIDs, in `trust_domain`, also wants a single
/// audience.
pub fn token_claims(
    entries: &[Spanned<ClaimsEntry>],
    audiences: &[String],
    facts: &Facts<'_>,
    trust_domain: &str,
) -> Result<Option<TokenClaims>, ClaimsRefusal> {
    let Some((entry, claimed)) = entries.iter().find_map(|entry| {
        audiences
            .iter()
            .find(|a| entry.value.matches(a))
            .map(|a| (&entry.value, a))
    }) else {
        return Ok(None);
    };
    if let Some(other) = audiences.iter().find(|a| !entry.matches(a)) {
        return Err(ClaimsRefusal::Mixed {
            claimed: claimed.clone(),
            other: other.clone(),
        });
    }
    let subject = if entry.jwt_svid {
        if audiences.len() != 1 {
            return Err(ClaimsRefusal::SvidAudiences {
                audience: claimed.clone(),
                count: audiences.len(),
            });
        }
        Some(spiffe_id(
            trust_domain,
            facts.namespace,
            facts.service_account,
        ))
    } else {
        None
    };
    let claims = entry.render(claimed, facts)?;
    let extra = (!claims.is_empty()).then_some(claims);
    if extra.is_none() && subject.is_none() {
        return Ok(None);
    }
    Ok(Some(TokenClaims { extra, subject }))
}

/// True if `prefix` names a part of warrant's annotation (or label) domain: `warrant.dev/…` or
/// `<sub>.warrant.dev/…`. The empty prefix, or one outside the domain, would reach annotations
/// and labels that other tools keep (and that the cache never holds).
fn in_warrant_domain(prefix: &str) -> bool {
    prefix.contains('/') && warrant_objects::is_warrant_annotation(&format!("{prefix}x"))
}

/// Checks the `claims` section; an error says which entry, which claim and on which line.
pub(crate) fn check(entries: &[Spanned<ClaimsEntry>]) -> Result<(), String> {
    for (index, spanned) in entries.iter().enumerate() {
        let entry = &spanned.value;
        let at = |line: u64, what: &str| format!("line {line}: claims[{index}]{what}");
        let head = spanned.referenced.line();
        if entry.audiences.is_empty() {
            return Err(at(head, ": audiences may not be empty"));
        }
        if entry.set.is_empty() && entry.aws_session_tags.is_none() && !entry.jwt_svid {
            return Err(at(
                head,
                ": sets nothing (give set, awsSessionTags or jwtSvid)",
            ));
        }
        for (field, prefix) in [
            ("annotationPrefix", &entry.annotation_prefix),
            ("labelPrefix", &entry.label_prefix),
        ] {
            if let Some(Spanned {
                value: prefix,
                referenced,
                ..
            }) = prefix
                && !in_warrant_domain(prefix)
            {
                return Err(at(
                    referenced.line(),
                    &format!(
                        ".{field}: {prefix:?} is not a prefix in warrant's domain (such as \"abac.warrant.dev/\"): only those annotations and labels are kept, and an empty or wider prefix would hand relying parties whatever other tools keep"
                    ),
                ));
            }
        }
        for (name, spec) in &entry.set {
            check_set(entry, name, spec).map_err(|(line, what)| at(line, &what))?;
        }
        if let Some(aws) = &entry.aws_session_tags {
            check_aws_session_tags(entry, aws).map_err(|(line, what)| at(line, &what))?;
        }
    }
    Ok(())
}

/// A flaw in one entry: its line, and what follows `claims[i]` in the message.
type Flaw = (u64, String);

/// One claim of an entry's `set`: a name a policy may set, and a template the entry can fill.
fn check_set(entry: &ClaimsEntry, name: &str, spec: &Spanned<ValueSpec>) -> Result<(), Flaw> {
    let line = spec.referenced.line();
    let what = format!(".set[{name:?}]");
    if name.is_empty() {
        return Err((line, ".set: a claim name may not be empty".to_owned()));
    }
    if is_reserved_claim(name) {
        return Err((
            line,
            format!(
                "{what}: {name:?} is a registered claim (iss, sub, aud, exp, iat, nbf, jti, kubernetes.io, cnf, in any case), which a policy can never set"
            ),
        ));
    }
    if name == AWS_TAGS_CLAIM {
        return Err((
            line,
            format!(
                "{what}: AWS's session tags are made by awsSessionTags, checked against AWS's limits"
            ),
        ));
    }
    check_template(entry, line, &what, &spec.value)
}

/// An entry's `awsSessionTags`: keys within AWS's limits, each value a template the entry can
/// fill whose literal text is within them too.
fn check_aws_session_tags(entry: &ClaimsEntry, aws: &Spanned<AwsSessionTags>) -> Result<(), Flaw> {
    let line = aws.referenced.line();
    let tags = &aws.value;
    warrant_token::check_aws_tag_keys(
        tags.principal_tags.keys().map(String::as_str),
        &tags.transitive_tag_keys,
    )
    .map_err(|e| (line, format!(".awsSessionTags: {e}")))?;
    for (key, spec) in &tags.principal_tags {
        let line = spec.referenced.line();
        let what = format!(".awsSessionTags.principalTags[{key:?}]");
        check_template(entry, line, &what, &spec.value)?;
        // The text around the placeholders is in every value: over AWS's limits
        // already, it always would be.
        warrant_token::check_aws_tag_value(key, &spec.value.value.literal_text())
            .map_err(|e| (line, format!("{what}: {e}")))?;
    }
    Ok(())
}

/// A value's template (`what`, at `line`) names only facts the entry reads: an annotation
/// needs its `annotationPrefix`, a pod label its `labelPrefix`.
fn check_template(
    entry: &ClaimsEntry,
    line: u64,
    what: &str,
    spec: &ValueSpec,
) -> Result<(), Flaw> {
    for fact in spec.value.facts() {
        let (needs, field) = match fact {
            Fact::ServiceAccountAnnotation(_) => {
                (entry.annotation_prefix.is_none(), "annotationPrefix")
            }
            Fact::PodLabel(_) => (entry.label_prefix.is_none(), "labelPrefix"),
            _ => (false, ""),
        };
        if needs {
            return Err((
                line,
                format!("{what}: ${{{fact}}} needs the entry's {field}"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "claims_tests.rs"]
mod tests;
