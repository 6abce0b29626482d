use serde_json::json;

use super::*;
use crate::authz::Policy;

const HEAD: &str = "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\n";

fn policy(text: &str) -> Policy {
    Policy::parse(&format!("{HEAD}{text}"), "p.yaml").unwrap()
}

fn refusal(text: &str) -> String {
    Policy::parse(&format!("{HEAD}{text}"), "p.yaml")
        .unwrap_err()
        .to_string()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

struct World {
    annotations: Vec<(String, String)>,
    labels: Vec<(String, String)>,
}

impl World {
    fn new() -> World {
        World {
            annotations: pairs(&[
                ("abac.warrant.dev/cost-center", "cc-42"),
                (
                    "aws.warrant.dev/role-arn",
                    "arn:aws:iam::111122223333:role/web",
                ),
            ]),
            labels: pairs(&[
                ("abac.warrant.dev/team", "blue"),
                ("other.warrant.dev/team", "red"),
            ]),
        }
    }

    fn facts(&self, pod: bool) -> Facts<'_> {
        Facts {
            cluster: Some("prod-eu"),
            namespace: "shop",
            service_account: "web",
            service_account_uid: "sa-uid",
            annotations: &self.annotations,
            pod: pod.then_some(PodFacts {
                name: "web-1",
                uid: "pod-uid",
                node: "worker-2",
                labels: &self.labels,
            }),
        }
    }
}

fn aud(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| (*a).to_owned()).collect()
}

/// Every fact source, alone and in text, as the template names it.
#[test]
fn each_fact_source_makes_its_claim() {
    let p = policy(
        r#"claims:
- audiences: ["rp-*"]
  annotationPrefix: abac.warrant.dev/
  labelPrefix: abac.warrant.dev/
  set:
    ns: ${namespace}
    cluster: ${cluster}
    sa: ${serviceAccount.name}
    sa-uid: ${serviceAccount.uid}
    cost: ${serviceAccount.annotations.cost-center}
    pod: ${pod.name}
    pod-uid: ${pod.uid}
    node: ${pod.node}
    team: ${pod.labels.team}
    path: "${cluster}/${namespace}/${serviceAccount.name} costs $$5"
"#,
    );
    let world = World::new();
    let claims = p
        .extra_claims(&aud(&["rp-1"]), &world.facts(true))
        .unwrap()
        .unwrap();
    let expected = json!({
        "ns": "shop",
        "cluster": "prod-eu",
        "sa": "web",
        "sa-uid": "sa-uid",
        "cost": "cc-42",
        "pod": "web-1",
        "pod-uid": "pod-uid",
        "node": "worker-2",
        "team": "blue",
        "path": "prod-eu/shop/web costs $5",
    });
    assert_eq!(serde_json::to_value(&claims).unwrap(), expected);
    // Only the audiences the policy names get claims.
    assert_eq!(
        p.extra_claims(
            &aud(&["https://kubernetes.default.svc"]),
            &world.facts(true)
        )
        .unwrap(),
        None
    );
    // A token for a named audience and another is refused, not given claims the other
    // audience does not expect.
    let mixed = p
        .extra_claims(&aud(&["rp-1", "api"]), &world.facts(true))
        .unwrap_err();
    assert!(
        matches!(&mixed, ClaimsRefusal::Mixed { claimed, other } if claimed == "rp-1" && other == "api"),
        "{mixed}"
    );
}

/// A placeholder names what follows the prefix: an annotation or a label outside it is never
/// read, even when one of the same name exists under another prefix.
#[test]
fn annotations_and_labels_outside_the_prefix_are_missing() {
    let p = policy(
        r#"claims:
- audiences: [rp]
  annotationPrefix: abac.warrant.dev/
  labelPrefix: abac.warrant.dev/
  set:
    role: ${serviceAccount.annotations.role-arn}
"#,
    );
    let world = World::new();
    let err = p
        .extra_claims(&aud(&["rp"]), &world.facts(true))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the authorization policy sets the claim \"role\" for the audience \"rp\" from ${serviceAccount.annotations.role-arn}, which the service account does not have"
    );
    // A prefix that is a prefix of the key, but not the whole of what precedes the name.
    let p = policy(
        r#"claims:
- audiences: [rp]
  labelPrefix: warrant.dev/
  ifMissing: omit
  set:
    team: ${pod.labels.team}
"#,
    );
    let labels = pairs(&[("x.warrant.dev/team", "red"), ("warrant.dev/teams", "x")]);
    let mut facts = world.facts(true);
    if let Some(pod) = &mut facts.pod {
        pod.labels = &labels;
    }
    assert_eq!(p.extra_claims(&aud(&["rp"]), &facts).unwrap(), None);
}

/// A missing fact refuses the token or omits the claim, as the entry says or the value
/// overrides.
#[test]
fn missing_facts_refuse_or_omit_as_the_policy_says() {
    let world = World::new();
    let refuse = policy(
        r#"claims:
- audiences: [rp]
  set:
    node: ${pod.node}
"#,
    );
    let err = refuse
        .extra_claims(&aud(&["rp"]), &world.facts(false))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("from ${pod.node}, which this token (bound to no pod) does not have"),
        "{err}"
    );
    let omit = policy(
        r#"claims:
- audiences: [rp]
  ifMissing: omit
  set:
    node: ${pod.node}
    ns: ${namespace}
"#,
    );
    assert_eq!(
        serde_json::to_value(
            omit.extra_claims(&aud(&["rp"]), &world.facts(false))
                .unwrap()
                .unwrap()
        )
        .unwrap(),
        json!({"ns": "shop"})
    );
    // Per claim, against the entry's choice.
    let per_claim = policy(
        r#"claims:
- audiences: [rp]
  ifMissing: omit
  set:
    node: {value: "${pod.node}", ifMissing: refuse}
"#,
    );
    assert!(
        per_claim
            .extra_claims(&aud(&["rp"]), &world.facts(false))
            .is_err()
    );
    let per_claim = policy(
        r#"claims:
- audiences: [rp]
  set:
    cluster: {value: "${cluster}", ifMissing: omit}
"#,
    );
    let mut facts = world.facts(true);
    facts.cluster = None;
    assert_eq!(per_claim.extra_claims(&aud(&["rp"]), &facts).unwrap(), None);
}

/// The recipe's claim, field by field: each tag a list of its one value, transitive keys
/// only of tags present.
#[test]
fn aws_session_tags_from_facts() {
    let p = policy(
        r#"claims:
- audiences: [sts.amazonaws.com]
  labelPrefix: abac.warrant.dev/
  awsSessionTags:
    principalTags:
      Namespace: ${namespace}
      Team: ${pod.labels.team}
      Owner: {value: "${pod.labels.owner}", ifMissing: omit}
    transitiveTagKeys: [Namespace, Owner]
"#,
    );
    let world = World::new();
    let claims = p
        .extra_claims(&aud(&["sts.amazonaws.com"]), &world.facts(true))
        .unwrap()
        .unwrap();
    assert_eq!(claims.len(), 1);
    let tags = &claims[warrant_token::AWS_TAGS_CLAIM];
    assert_eq!(
        tags["principal_tags"],
        json!({"Namespace": ["shop"], "Team": ["blue"]})
    );
    assert_eq!(tags["transitive_tag_keys"], json!(["Namespace"]));
    assert_eq!(tags.as_object().unwrap().len(), 2);
}

/// A value made of facts that AWS would refuse refuses the token.
#[test]
fn a_session_tag_value_over_aws_limits_refuses_the_token() {
    let p = policy(
        r#"claims:
- audiences: [sts.amazonaws.com]
  annotationPrefix: abac.warrant.dev/
  awsSessionTags:
    principalTags:
      Cost: ${serviceAccount.annotations.cost-center}
"#,
    );
    let mut world = World::new();
    world.annotations = pairs(&[("abac.warrant.dev/cost-center", &"9".repeat(257))]);
    let err = p
        .extra_claims(&aud(&["sts.amazonaws.com"]), &world.facts(false))
        .unwrap_err();
    assert_eq!(
        err,
        ClaimsRefusal::Aws {
            audience: "sts.amazonaws.com".into(),
            source: AwsTagError::ValueTooLong {
                key: "Cost".into(),
                chars: 257
            }
        }
    );
    world.annotations = pairs(&[("abac.warrant.dev/cost-center", "a;b")]);
    assert!(
        p.extra_claims(&aud(&["sts.amazonaws.com"]), &world.facts(false))
            .unwrap_err()
            .to_string()
            .contains("';'")
    );
}

/// What the policy loader refuses, each message naming the line.
#[test]
fn bad_claims_are_refused_with_their_line() {
    // A reserved claim, in its own spelling and in another case.
    let err = refusal("claims:\n- audiences: [rp]\n  set:\n    team: x\n    sub: ${namespace}\n");
    assert!(
        err.contains("line 7: claims[0].set[\"sub\"]: \"sub\" is a registered claim"),
        "{err}"
    );
    let err = refusal("claims:\n- audiences: [rp]\n  set:\n    Kubernetes.io: x\n");
    assert!(err.contains("is a registered claim"), "{err}");
    for reserved in ["iss", "aud", "exp", "iat", "nbf", "jti", "cnf"] {
        let err = refusal(&format!(
            "claims:\n- audiences: [rp]\n  set:\n    {reserved}: x\n"
        ));
        assert!(err.contains("registered claim"), "{reserved}: {err}");
    }
    // The AWS claim is the recipe's.
    let err = refusal("claims:\n- audiences: [rp]\n  set:\n    https://aws.amazon.com/tags: x\n");
    assert!(err.contains("awsSessionTags"), "{err}");
    // Templates that do not parse: the parser names the line.
    for bad in [
        "${namespaces}",
        "${pod.labels}",
        "${namespace",
        "5$",
        "${pod.labels.a/b}",
    ] {
        let err = refusal(&format!(
            "claims:\n- audiences: [rp]\n  labelPrefix: abac.warrant.dev/\n  set:\n    x: \"{bad}\"\n"
        ));
        assert!(err.contains("line 7"), "{bad}: {err}");
    }
    // Prefixes that would expose every annotation or label, or others' domains.
    for prefix in ["\"\"", "eks.amazonaws.com/", "warrant.dev", "a"] {
        let err = refusal(&format!(
            "claims:\n- audiences: [rp]\n  annotationPrefix: {prefix}\n  set:\n    x: y\n"
        ));
        assert!(
            err.contains("line 5: claims[0].annotationPrefix") && err.contains("warrant's domain"),
            "{prefix}: {err}"
        );
    }
    let err = refusal("claims:\n- audiences: [rp]\n  set:\n    x: ${pod.labels.team}\n");
    assert!(
        err.contains(
            "line 6: claims[0].set[\"x\"]: ${pod.labels.team} needs the entry's labelPrefix"
        ),
        "{err}"
    );
    // Values and keys over AWS's limits, when the policy already says so.
    let long = "v".repeat(257);
    let err = refusal(&format!(
        "claims:\n- audiences: [rp]\n  awsSessionTags:\n    principalTags:\n      Team: \"{long}${{namespace}}\"\n"
    ));
    assert!(
        err.contains("line 7: claims[0].awsSessionTags.principalTags[\"Team\"]: the value of session tag \"Team\" is 257 characters long"),
        "{err}"
    );
    let key = "k".repeat(129);
    let err = refusal(&format!(
        "claims:\n- audiences: [rp]\n  awsSessionTags:\n    principalTags:\n      {key}: x\n"
    ));
    assert!(err.contains("key is 129 characters long"), "{err}");
    let many: String = (0..51).map(|i| format!("      k{i}: x\n")).collect();
    let err = refusal(&format!(
        "claims:\n- audiences: [rp]\n  awsSessionTags:\n    principalTags:\n{many}"
    ));
    assert!(err.contains("51 session tags"), "{err}");
    let err = refusal(
        "claims:\n- audiences: [rp]\n  awsSessionTags:\n    principalTags: {a: x}\n    transitiveTagKeys: [b]\n",
    );
    assert!(err.contains("transitive tag key \"b\""), "{err}");
    // Entries that say nothing, or name no audience; unknown fields.
    assert!(refusal("claims:\n- audiences: [rp]\n").contains("sets nothing"));
    assert!(
        refusal("claims:\n- audiences: []\n  set: {x: y}\n").contains("audiences may not be empty")
    );
    assert!(refusal("claims:\n- audiences: [rp]\n  sets: {x: y}\n").contains("sets"));
    assert!(
        refusal("claims:\n- audiences: [rp]\n  set: {x: {value: y, ifmissing: omit}}\n")
            .contains("ifmissing")
    );
}

#[test]
fn templates() {
    let t = Template::parse("a$${b}${namespace}").unwrap();
    assert_eq!(t.literal_text(), "a${b}");
    assert_eq!(t.facts().collect::<Vec<_>>(), [&Fact::Namespace]);
    assert_eq!(Template::parse("").unwrap().pieces, []);
    assert_eq!(
        Template::parse("${ pod.name }").unwrap().facts().next(),
        Some(&Fact::PodName)
    );
    assert!(Template::parse("${}").is_err());
    assert!(Template::parse("$namespace").is_err());
}

/// An entry with `jwtSvid` makes the token a SPIFFE JWT-SVID: its subject is the service
/// account's SPIFFE ID in the pod certificates' trust domain, its audience one.
#[test]
fn jwt_svids_name_the_spiffe_id_and_one_audience() {
    let world = World::new();
    let section = r#"claims:
  - audiences: ["spiffe://prod.example.org/payments"]
    jwtSvid: true
  - audiences: ["svid-with-claims"]
    jwtSvid: true
    set:
      cluster: ${cluster}
"#;
    let p = policy(section);
    let svid = p
        .token_claims(
            &aud(&["spiffe://prod.example.org/payments"]),
            &world.facts(false),
            Some("prod.example.org"),
        )
        .unwrap()
        .unwrap();
    assert_eq!(
        svid,
        TokenClaims {
            extra: None,
            subject: Some("spiffe://prod.example.org/ns/shop/sa/web".to_owned()),
        }
    );
    // Without the server's trust domain, the pod certificates' default.
    let default = p
        .token_claims(&aud(&["svid-with-claims"]), &world.facts(false), None)
        .unwrap()
        .unwrap();
    assert_eq!(
        default.subject.as_deref(),
        Some("spiffe://cluster.local/ns/shop/sa/web")
    );
    assert_eq!(default.extra.unwrap()["cluster"], "prod-eu");
    // The policy's podCertificates section names the trust domain for both.
    let with_section = policy(&format!(
        "{section}podCertificates:\n  trustDomain: mesh.example\n  signers: []\n"
    ));
    let subject = with_section
        .token_claims(
            &aud(&["svid-with-claims"]),
            &world.facts(false),
            Some("prod.example.org"),
        )
        .unwrap()
        .unwrap()
        .subject;
    assert_eq!(
        subject.as_deref(),
        Some("spiffe://mesh.example/ns/shop/sa/web")
    );
    // Two audiences: refused, as a JWT-SVID has one.
    let two = p
        .token_claims(
            &aud(&["svid-with-claims", "svid-with-claims"]),
            &world.facts(false),
            None,
        )
        .unwrap_err();
    assert!(
        matches!(&two, ClaimsRefusal::SvidAudiences { count: 2, .. }),
        "{two}"
    );
    assert!(two.to_string().contains("one audience"), "{two}");
    // Audiences no entry names: kube's token, untouched.
    assert_eq!(
        p.token_claims(&aud(&["api"]), &world.facts(false), None)
            .unwrap(),
        None
    );
    // An entry that sets nothing at all is still refused.
    let nothing = refusal("claims:\n  - audiences: [rp]\n    jwtSvid: false\n");
    assert!(nothing.contains("sets nothing"), "{nothing}");
}
