//! The types warrant's API reads and writes, as OpenAPI definitions.
//!
//! The names and fields are Kubernetes' (they are the same wire types, see `wire.rs`), so
//! kubectl validates a manifest against warrant exactly as against kube-apiserver and names the
//! same types in its messages. The descriptions are warrant's own and say what warrant does.

use super::schema::{
    AUTHENTICATION_V1, Definition, Field, GroupVersionExt as _, Schema, WARRANT_V1ALPHA1, field,
    strings,
};

/// `TokenReview`, in the authentication group.
pub(crate) const TOKEN_REVIEW: &str = "io.k8s.api.authentication.v1.TokenReview";
/// `TokenReview` in warrant's own group: kube's, and the proof of a key-bound token.
pub(crate) const WARRANT_TOKEN_REVIEW: &str = "dev.warrant.v1alpha1.TokenReview";
/// `TokenRequest`.
pub(crate) const TOKEN_REQUEST: &str = "io.k8s.api.authentication.v1.TokenRequest";

const TOKEN_REVIEW_SPEC: &str = "io.k8s.api.authentication.v1.TokenReviewSpec";
const TOKEN_REVIEW_STATUS: &str = "io.k8s.api.authentication.v1.TokenReviewStatus";
const WARRANT_TOKEN_REVIEW_SPEC: &str = "dev.warrant.v1alpha1.TokenReviewSpec";
const WARRANT_TOKEN_REVIEW_STATUS: &str = "dev.warrant.v1alpha1.TokenReviewStatus";
const DPOP_PROOF: &str = "dev.warrant.v1alpha1.DPoPProof";
const KEY_BINDING: &str = "dev.warrant.v1alpha1.KeyBinding";
const USER_INFO: &str = "io.k8s.api.authentication.v1.UserInfo";
const TOKEN_REQUEST_SPEC: &str = "io.k8s.api.authentication.v1.TokenRequestSpec";
const TOKEN_REQUEST_STATUS: &str = "io.k8s.api.authentication.v1.TokenRequestStatus";
const BOUND_OBJECT_REFERENCE: &str = "io.k8s.api.authentication.v1.BoundObjectReference";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const OWNER_REFERENCE: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference";
const MANAGED_FIELDS_ENTRY: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry";
const FIELDS_V1: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1";
const TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";

fn object(fields: Vec<Field>, required: &'static [&'static str]) -> Schema {
    Schema::Object { fields, required }
}

fn list_of(name: &'static str) -> Schema {
    Schema::Array(Box::new(Schema::Ref(name)))
}

/// `apiVersion`, `kind` and `metadata`, which every top-level object starts with.
fn type_and_meta(
    api_version: &'static str,
    kind: &'static str,
    metadata: &'static str,
) -> Vec<Field> {
    vec![
        field("apiVersion", api_version, Schema::Str),
        field("kind", kind, Schema::Str),
        field("metadata", metadata, Schema::Ref(OBJECT_META)),
    ]
}

/// A TokenReview object whose spec and status are `spec` and `status`.
fn token_review(spec: &'static str, status: &'static str) -> Schema {
    object(
        [
            type_and_meta(
                "The API version of this object. The answer is in the version of the request.",
                "`TokenReview`.",
                "Standard object metadata. TokenReviews are not stored: the answer carries the \
                 metadata of the request.",
            ),
            vec![
                field("spec", "What to review.", Schema::Ref(spec)),
                field(
                    "status",
                    "The verdict, filled in by warrant.",
                    Schema::Ref(status),
                ),
            ],
        ]
        .concat(),
        &["spec"],
    )
}

/// The fields of kube's TokenReviewSpec.
fn review_spec_fields() -> Vec<Field> {
    vec![
        field("token", "The bearer token, as presented.", Schema::Str),
        field(
            "audiences",
            "The audiences the caller accepts; the token must be meant for at least one. Empty \
             means warrant's API audiences (`--api-audiences`).",
            strings(),
        ),
    ]
}

/// The fields of kube's TokenReviewStatus.
fn review_status_fields() -> Vec<Field> {
    vec![
        field(
            "authenticated",
            "True when the token is valid.",
            Schema::Bool,
        ),
        field(
            "user",
            "The service account the token stands for, when it is valid.",
            Schema::Ref(USER_INFO),
        ),
        field(
            "audiences",
            "The requested audiences the token is valid for. A caller that sent audiences \
             should check that this is not empty.",
            strings(),
        ),
        field(
            "error",
            "Why the token is not valid, in kube-apiserver's words.",
            Schema::Str,
        ),
    ]
}

/// Every definition warrant's documents can refer to.
pub(crate) fn catalogue() -> Vec<Definition> {
    vec![
        Definition {
            name: TOKEN_REVIEW,
            description: "Asks whether a bearer token is valid and whom it stands for. warrant \
                          checks the signature, issuer, audiences and times, and that the \
                          service account and any bound object still exist with the same UID. \
                          A token bound to a key (cnf) is refused here: this review cannot \
                          carry the proof; warrant.dev/v1alpha1's can. Nothing is stored.",
            schema: token_review(TOKEN_REVIEW_SPEC, TOKEN_REVIEW_STATUS),
            kinds: vec![AUTHENTICATION_V1.kind("TokenReview")],
        },
        Definition {
            name: TOKEN_REVIEW_SPEC,
            description: "A token, and the audiences it should be valid for.",
            schema: object(review_spec_fields(), &["token"]),
            kinds: vec![],
        },
        Definition {
            name: TOKEN_REVIEW_STATUS,
            description: "The verdict on a token: whether it is valid, and whom it stands for.",
            schema: object(review_status_fields(), &[]),
            kinds: vec![],
        },
        Definition {
            name: WARRANT_TOKEN_REVIEW,
            description: "Asks whether a token is valid and whom it stands for, as \
                          authentication.k8s.io's TokenReview does, and takes the proof of \
                          the key a key-bound token (cnf) is bound to: the DPoP proof that \
                          came with it, or the thumbprint of the client certificate it came \
                          over. Nothing is stored.",
            schema: token_review(WARRANT_TOKEN_REVIEW_SPEC, WARRANT_TOKEN_REVIEW_STATUS),
            kinds: vec![WARRANT_V1ALPHA1.kind("TokenReview")],
        },
        Definition {
            name: WARRANT_TOKEN_REVIEW_SPEC,
            description: "A token, the audiences it should be valid for, and, for a key-bound \
                          token, the proof of its key (at most one of dpop and \
                          certificateThumbprint).",
            schema: object(
                [
                    review_spec_fields(),
                    vec![
                        field(
                            "dpop",
                            "The DPoP proof (RFC 9449) that came with a token bound to a DPoP \
                             key (cnf.jkt), and the request it came with. Given for a token \
                             that is not key-bound, the review fails.",
                            Schema::Ref(DPOP_PROOF),
                        ),
                        field(
                            "certificateThumbprint",
                            "For a token bound to a client certificate (cnf.x5t#S256): the \
                             RFC 8705 thumbprint of the certificate the client's TLS \
                             connection presented, the unpadded base64url SHA-256 of its DER. \
                             Given for a token that is not key-bound, the review fails.",
                            Schema::Str,
                        ),
                    ],
                ]
                .concat(),
                &["token"],
            ),
            kinds: vec![],
        },
        Definition {
            name: DPOP_PROOF,
            description: "A DPoP proof as the relying party received it. Its htm and htu must \
                          name the relying party's request, its ath the token, its key the \
                          token's cnf.jkt; each proof is accepted once.",
            schema: object(
                vec![
                    field(
                        "proof",
                        "The DPoP header's value: the proof JWT (at most 8192 bytes).",
                        Schema::Str,
                    ),
                    field(
                        "method",
                        "The HTTP method of the request the proof came with, such as GET.",
                        Schema::Str,
                    ),
                    field(
                        "uri",
                        "The absolute https URI of the request the proof came with, as the \
                         client addressed it; the query is ignored.",
                        Schema::Str,
                    ),
                ],
                &["proof", "method", "uri"],
            ),
            kinds: vec![],
        },
        Definition {
            name: WARRANT_TOKEN_REVIEW_STATUS,
            description: "The verdict on a token: whether it is valid, whom it stands for, and \
                          which key binding was checked.",
            schema: object(
                [
                    review_status_fields(),
                    vec![field(
                        "keyBinding",
                        "Set when a key-bound token passed with the proof of its key.",
                        Schema::Ref(KEY_BINDING),
                    )],
                ]
                .concat(),
                &[],
            ),
            kinds: vec![],
        },
        Definition {
            name: KEY_BINDING,
            description: "The key binding a review checked.",
            schema: object(
                vec![
                    field(
                        "method",
                        "DPoP (a DPoP proof of the key) or ClientCertificate (the client \
                         certificate's thumbprint).",
                        Schema::Str,
                    ),
                    field(
                        "thumbprint",
                        "The token's cnf.jkt or cnf.x5t#S256: the key's thumbprint.",
                        Schema::Str,
                    ),
                ],
                &["method", "thumbprint"],
            ),
            kinds: vec![],
        },
        Definition {
            name: USER_INFO,
            description: "A user, as an authenticator describes it.",
            schema: object(
                vec![
                    field(
                        "username",
                        "`system:serviceaccount:<namespace>:<name>`.",
                        Schema::Str,
                    ),
                    field("uid", "The service account's UID.", Schema::Str),
                    field(
                        "groups",
                        "The service account groups, and `system:authenticated`.",
                        strings(),
                    ),
                    field(
                        "extra",
                        "What else the token says: the bound pod, node and credential ID.",
                        Schema::Map(Box::new(strings())),
                    ),
                ],
                &[],
            ),
            kinds: vec![],
        },
        Definition {
            name: TOKEN_REQUEST,
            description: "Asks warrant to issue a token for a service account, optionally bound \
                          to a pod, secret or node. Nothing is stored: the token is in the \
                          answer.",
            schema: object(
                [
                    type_and_meta(
                        "The API version of this object: `authentication.k8s.io/v1`, whichever \
                         group's URL it is sent to.",
                        "`TokenRequest`.",
                        "Standard object metadata. TokenRequests are not stored: the answer \
                         carries the service account's name, namespace and UID.",
                    ),
                    vec![
                        field("spec", "What to issue.", Schema::Ref(TOKEN_REQUEST_SPEC)),
                        field(
                            "status",
                            "The issued token, filled in by warrant.",
                            Schema::Ref(TOKEN_REQUEST_STATUS),
                        ),
                    ],
                ]
                .concat(),
                // A request without a spec asks for a token with the defaults.
                &[],
            ),
            kinds: vec![AUTHENTICATION_V1.kind("TokenRequest")],
        },
        Definition {
            name: TOKEN_REQUEST_SPEC,
            description: "The audiences, lifetime and binding of a token to issue.",
            schema: object(
                vec![
                    field(
                        "audiences",
                        "Who the token is for. Empty or absent means warrant's API audiences \
                         (`--api-audiences`).",
                        strings(),
                    ),
                    field(
                        "expirationSeconds",
                        "How long the token should be valid, in seconds: at least 600, 3600 \
                         if absent. It may be shortened to `--service-account-max-token-\
                         expiration`, with a warning.",
                        Schema::Int64,
                    ),
                    field(
                        "boundObjectRef",
                        "The object the token is bound to: it stops being valid when that \
                         object is deleted.",
                        Schema::Ref(BOUND_OBJECT_REFERENCE),
                    ),
                ],
                &[],
            ),
            kinds: vec![],
        },
        Definition {
            name: BOUND_OBJECT_REFERENCE,
            description: "A pod, secret or node, by name and optionally UID.",
            schema: object(
                vec![
                    field("kind", "`Pod`, `Secret` or `Node`.", Schema::Str),
                    field(
                        "apiVersion",
                        "The object's API version; `v1` (only its group is compared).",
                        Schema::Str,
                    ),
                    field(
                        "name",
                        "The object's name; pods and secrets are in the service account's \
                         namespace.",
                        Schema::Str,
                    ),
                    field(
                        "uid",
                        "The object's UID; if given, it must match.",
                        Schema::Str,
                    ),
                ],
                &[],
            ),
            kinds: vec![],
        },
        Definition {
            name: TOKEN_REQUEST_STATUS,
            description: "The issued token.",
            schema: object(
                vec![
                    field("token", "The signed JWT.", Schema::Str),
                    field(
                        "expirationTimestamp",
                        "When the token expires, as requested (an extended token's own \
                         expiry may be later).",
                        Schema::Ref(TIME),
                    ),
                ],
                // Always in an answer, but a request may carry an empty status (kubectl's
                // does), as kube-apiserver accepts.
                &[],
            ),
            kinds: vec![],
        },
        Definition {
            name: OBJECT_META,
            description: "Kubernetes object metadata. warrant reads the name, namespace and \
                          UID where the API gives them a meaning, and echoes the rest.",
            schema: object(
                vec![
                    field(
                        "annotations",
                        "Free-form string metadata.",
                        Schema::Map(Box::new(Schema::Str)),
                    ),
                    field(
                        "creationTimestamp",
                        "When the object was created; set by the server.",
                        Schema::Ref(TIME),
                    ),
                    field(
                        "deletionGracePeriodSeconds",
                        "Seconds allowed for graceful deletion; set by the server.",
                        Schema::Int64,
                    ),
                    field(
                        "deletionTimestamp",
                        "When the object will be deleted; set by the server.",
                        Schema::Ref(TIME),
                    ),
                    field(
                        "finalizers",
                        "Conditions that must clear before the object is deleted.",
                        strings(),
                    ),
                    field(
                        "generateName",
                        "A prefix for a generated name, used when `name` is empty.",
                        Schema::Str,
                    ),
                    field(
                        "generation",
                        "The generation of the desired state; set by the server.",
                        Schema::Int64,
                    ),
                    field(
                        "labels",
                        "String keys and values for selecting objects.",
                        Schema::Map(Box::new(Schema::Str)),
                    ),
                    field(
                        "managedFields",
                        "Which manager owns which fields; maintained by the server.",
                        list_of(MANAGED_FIELDS_ENTRY),
                    ),
                    field("name", "The object's name.", Schema::Str),
                    field("namespace", "The object's namespace.", Schema::Str),
                    field(
                        "ownerReferences",
                        "The objects this one depends on.",
                        list_of(OWNER_REFERENCE),
                    ),
                    field(
                        "resourceVersion",
                        "An opaque version of the object; set by the server.",
                        Schema::Str,
                    ),
                    field("selfLink", "Deprecated and unused.", Schema::Str),
                    field("uid", "The object's unique ID.", Schema::Str),
                ],
                &[],
            ),
            kinds: vec![],
        },
        Definition {
            name: OWNER_REFERENCE,
            description: "An object another object depends on.",
            schema: object(
                vec![
                    field("apiVersion", "The owner's API version.", Schema::Str),
                    field("kind", "The owner's kind.", Schema::Str),
                    field("name", "The owner's name.", Schema::Str),
                    field("uid", "The owner's UID.", Schema::Str),
                    field(
                        "controller",
                        "True if the owner is the managing controller.",
                        Schema::Bool,
                    ),
                    field(
                        "blockOwnerDeletion",
                        "True if the owner may not be deleted before this object.",
                        Schema::Bool,
                    ),
                ],
                &["apiVersion", "kind", "name", "uid"],
            ),
            kinds: vec![],
        },
        Definition {
            name: MANAGED_FIELDS_ENTRY,
            description: "The fields one manager owns.",
            schema: object(
                vec![
                    field(
                        "apiVersion",
                        "The version the field set is written in.",
                        Schema::Str,
                    ),
                    field("fieldsType", "The format of the field set.", Schema::Str),
                    field("fieldsV1", "The field set.", Schema::Ref(FIELDS_V1)),
                    field("manager", "Who manages the fields.", Schema::Str),
                    field(
                        "operation",
                        "How the fields were last written.",
                        Schema::Str,
                    ),
                    field(
                        "subresource",
                        "The subresource they were written through.",
                        Schema::Str,
                    ),
                    field("time", "When they were last written.", Schema::Ref(TIME)),
                ],
                &[],
            ),
            kinds: vec![],
        },
        Definition {
            name: FIELDS_V1,
            description: "A set of fields, in the server-side apply format.",
            schema: Schema::FreeForm,
            kinds: vec![],
        },
        Definition {
            name: TIME,
            description: "An RFC 3339 timestamp, to the second.",
            schema: Schema::DateTime,
            kinds: vec![],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_has_a_definition() {
        let catalogue = catalogue();
        for definition in &catalogue {
            let mut references = Vec::new();
            definition.schema.references(&mut references);
            for name in references {
                assert!(
                    catalogue.iter().any(|d| d.name == name),
                    "{} refers to {name}, which is not defined",
                    definition.name
                );
            }
        }
    }
}
