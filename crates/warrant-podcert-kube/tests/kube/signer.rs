//! The controller: what reaches the decision, and what becomes of what it returns.

use std::time::Duration;

use serde_json::json;
use warrant_kube_fixture::podcert::pod_certificate_requests;
use warrant_podcert_kube::{
    Config, Controller, Error, Outcome, PcrVersion, Report, choose_version,
};

use crate::{
    Double, PATIENCE, SIGNER, client, create, fixture, metric, pcr, series, start, stored, terminal,
};

fn written(signer: &str, result: &str) -> String {
    format!("warrant_podcert_decisions_written_total{{signer=\"{signer}\",result=\"{result}\"}}")
}

#[tokio::test]
async fn a_decision_is_written_to_the_status_with_the_resource_version_it_was_made_from() {
    let fixture = fixture("v1beta1").await;
    create(&fixture, pcr("req-1", SIGNER));
    let double = Double::issuing("replica-a");
    let running = start(&fixture, &[SIGNER], double.clone());

    double
        .until("the status write", |d| !d.reports_for("req-1").is_empty())
        .await;
    assert_eq!(
        double.reports_for("req-1"),
        [Report::Written {
            status: terminal("Issued", "replica-a")
        }]
    );
    let stored = stored(&fixture, "req-1");
    assert_eq!(stored["status"], terminal("Issued", "replica-a"));
    assert_eq!(
        stored["spec"]["signerName"], SIGNER,
        "the spec is untouched"
    );

    // The double got the PCR as read, resourceVersion included, and the write used it.
    let seen = double.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].pcr["metadata"]["resourceVersion"].is_string());
    let log = fixture.request_log();
    assert!(
        log.iter().any(|r| r.starts_with(
            "PUT /apis/certificates.k8s.io/v1beta1/namespaces/demo/podcertificaterequests/req-1/status"
        )),
        "{log:#?}"
    );
    assert!(
        log.iter()
            .any(|r| r.contains("fieldSelector=spec.signerName%3Dwarrant.example.com%2Fspiffe")),
        "the watch selects by signer name: {log:#?}"
    );
    assert_eq!(metric(&running.registry, &written(SIGNER, "issued")), 1.0);
}

#[tokio::test]
async fn v1_is_used_where_discovery_serves_it_and_v1beta1_elsewhere() {
    let beta = fixture("v1beta1").await;
    assert_eq!(
        choose_version(&client(&beta)).await.unwrap(),
        PcrVersion::V1beta1
    );
    let ga = fixture("v1").await;
    assert_eq!(choose_version(&client(&ga)).await.unwrap(), PcrVersion::V1);
    let none = warrant_kube_fixture::Fixture::start().await.unwrap();
    assert!(matches!(
        choose_version(&client(&none)).await,
        Err(Error::NotServed)
    ));

    // A controller on a 1.37 cluster watches and writes v1.
    ga.create_json(pod_certificate_requests("v1"), pcr("req-1", SIGNER))
        .unwrap();
    let double = Double::issuing("replica-a");
    let _running = start(&ga, &[SIGNER], double.clone());
    double
        .until("the status write", |d| !d.reports_for("req-1").is_empty())
        .await;
    let log = ga.request_log();
    assert!(
        log.iter().any(|r| r.starts_with(
            "PUT /apis/certificates.k8s.io/v1/namespaces/demo/podcertificaterequests/req-1/status"
        )),
        "{log:#?}"
    );
    assert!(
        !log.iter()
            .any(|r| r.contains("/v1beta1/podcertificaterequests"))
    );
}

#[tokio::test]
async fn of_two_replicas_racing_for_one_pcr_one_write_wins_and_the_other_reports_a_lost_race() {
    let fixture = fixture("v1beta1").await;
    // Both replicas decide on the same resourceVersion; their writes are held until both
    // arrived, then let through one after the other.
    fixture.hold_writes("podcertificaterequests");
    let (a, b) = (Double::issuing("replica-a"), Double::issuing("replica-b"));
    let running_a = start(&fixture, &[SIGNER], a.clone());
    let running_b = start(&fixture, &[SIGNER], b.clone());
    create(&fixture, pcr("req-1", SIGNER));
    tokio::time::timeout(PATIENCE, fixture.until(|c| c.held_writes().len() == 2))
        .await
        .expect("both replicas write");
    let first_writer = fixture.held_writes()[0]["status"]["conditions"][0]["message"].clone();
    fixture.stop_holding_writes();
    assert_eq!(fixture.release_write().await, Some(200));
    assert_eq!(fixture.release_write().await, Some(409));

    for double in [&a, &b] {
        double
            .until("the outcome", |d| !d.reports_for("req-1").is_empty())
            .await;
    }
    let stored = stored(&fixture, "req-1");
    assert_eq!(stored["status"]["conditions"][0]["message"], first_writer);
    let (winner, loser, loser_metrics) = if first_writer == json!("written by replica-a") {
        (&a, &b, &running_b.registry)
    } else {
        (&b, &a, &running_a.registry)
    };
    assert!(matches!(
        winner.reports_for("req-1")[..],
        [Report::Written { .. }]
    ));
    assert_eq!(
        loser.reports_for("req-1"),
        [Report::LostRace {
            winner: stored["status"].clone()
        }]
    );
    let lost = format!("warrant_podcert_lost_races_total{{signer=\"{SIGNER}\"}}");
    assert_eq!(metric(loser_metrics, &lost), 1.0);
    let errors =
        format!("warrant_podcert_status_write_errors_total{{signer=\"{SIGNER}\",error=\"api\"}}");
    assert_eq!(
        metric(loser_metrics, &errors),
        0.0,
        "a lost race is not an error"
    );
    assert_eq!(
        loser.seen.lock().unwrap().len(),
        1,
        "the loser does not decide again"
    );
}

#[tokio::test]
async fn a_pcr_created_while_the_watch_was_down_or_expired_is_still_handled() {
    let fixture = fixture("v1beta1").await;
    create(&fixture, pcr("req-1", SIGNER));
    let double = Double::issuing("replica-a");
    let _running = start(&fixture, &[SIGNER], double.clone());
    double
        .until("the first PCR", |d| !d.reports_for("req-1").is_empty())
        .await;

    // The connection drops and the server is unreachable while a PCR is created: the watch
    // resumes from its resourceVersion and gets it.
    let watching = |c: &warrant_kube_fixture::Cluster| c.watchers("podcertificaterequests") == 1;
    tokio::time::timeout(PATIENCE, fixture.until(watching))
        .await
        .unwrap();
    fixture.stall(true);
    fixture.drop_watches();
    create(&fixture, pcr("req-2", SIGNER));
    fixture.stall(false);
    double
        .until("the PCR created while down", |d| {
            !d.reports_for("req-2").is_empty()
        })
        .await;

    // The same, but the history is compacted meanwhile: 410 Gone, a relist, and the PCR.
    tokio::time::timeout(PATIENCE, fixture.until(watching))
        .await
        .unwrap();
    fixture.stall(true);
    fixture.drop_watches();
    create(&fixture, pcr("req-3", SIGNER));
    fixture.compact();
    fixture.stall(false);
    double
        .until("the PCR created before the 410", |d| {
            !d.reports_for("req-3").is_empty()
        })
        .await;
    assert_eq!(
        stored(&fixture, "req-3")["status"],
        terminal("Issued", "replica-a")
    );
    let names = double.seen_names();
    for name in ["req-1", "req-2", "req-3"] {
        assert_eq!(
            names.iter().filter(|n| *n == name).count(),
            1,
            "{name} decided once: {names:?}"
        );
    }
}

#[tokio::test]
async fn a_requeue_writes_no_condition_and_the_pcr_is_decided_again() {
    let fixture = fixture("v1beta1").await;
    create(&fixture, pcr("req-1", SIGNER));
    let unavailable = Outcome::Requeue {
        reason: "the CA is unreachable".to_owned(),
        after: Duration::from_millis(1),
    };
    let double = Double::scripted(
        "replica-a",
        vec![unavailable.clone(), unavailable],
        Outcome::Write(terminal("Issued", "replica-a")),
        Some(fixture.cluster().clone()),
    );
    let running = start(&fixture, &[SIGNER], double.clone());
    double
        .until("the write after two requeues", |d| {
            !d.reports_for("req-1").is_empty()
        })
        .await;

    let seen = double.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "asked three times");
    for call in &seen {
        assert_eq!(
            call.stored_status,
            Some(json!({})),
            "no condition was written before the decision to issue"
        );
    }
    assert_eq!(
        stored(&fixture, "req-1")["status"],
        terminal("Issued", "replica-a")
    );
    let requeues = format!("warrant_podcert_requeues_total{{signer=\"{SIGNER}\"}}");
    assert_eq!(metric(&running.registry, &requeues), 2.0);
    let writes = fixture.request_log();
    let writes: Vec<&String> = writes.iter().filter(|r| r.starts_with("PUT ")).collect();
    assert_eq!(writes.len(), 1, "one status write: {writes:#?}");
}

#[tokio::test]
async fn terminal_pcrs_and_pcrs_of_other_signer_names_never_reach_the_decision() {
    let fixture = fixture("v1beta1").await;
    for (name, kind) in [
        ("issued", "Issued"),
        ("denied", "Denied"),
        ("failed", "Failed"),
    ] {
        let mut done = pcr(name, SIGNER);
        done["status"] = terminal(kind, "someone");
        create(&fixture, done);
    }
    create(&fixture, pcr("other", "other.example.com/x"));
    let double = Double::issuing("replica-a");
    let _running = start(&fixture, &[SIGNER], double.clone());
    // An open PCR created last: once it is decided, everything before it was seen.
    create(&fixture, pcr("open", SIGNER));
    double
        .until("the open PCR", |d| !d.reports_for("open").is_empty())
        .await;
    assert_eq!(double.seen_names(), ["open"]);
    assert_eq!(stored(&fixture, "other")["status"], json!({}));
}

#[tokio::test]
async fn a_status_kube_refuses_is_reported_with_its_message_and_not_retried() {
    let fixture = fixture("v1beta1").await;
    create(&fixture, pcr("req-1", SIGNER));
    // A status without a terminal condition: kube refuses it (step 6 of its rules).
    let bad = Outcome::Write(json!({ "notBefore": "2026-11-27T17:16:09Z" }));
    let double = Double::scripted(
        "replica-a",
        vec![bad],
        Outcome::Write(terminal("Issued", "replica-a")),
        None,
    );
    let running = start(&fixture, &[SIGNER], double.clone());
    double
        .until("the refusal", |d| !d.reports_for("req-1").is_empty())
        .await;
    assert_eq!(
        double.reports_for("req-1"),
        [Report::Refused {
            message: "PodCertificateRequest.certificates.k8s.io \"req-1\" is invalid: status: Invalid value: status is immutable unless transitioning to \"Issued\", \"Denied\", or \"Failed\"".to_owned()
        }]
    );
    // Another PCR, created after: once it is decided, req-1 had every chance to come back.
    create(&fixture, pcr("req-2", SIGNER));
    double
        .until("the next PCR", |d| !d.reports_for("req-2").is_empty())
        .await;
    assert_eq!(
        double.seen_names(),
        ["req-1", "req-2"],
        "req-1 is not retried"
    );
    assert_eq!(stored(&fixture, "req-1")["status"], json!({}));
    let invalid = format!(
        "warrant_podcert_status_write_errors_total{{signer=\"{SIGNER}\",error=\"invalid\"}}"
    );
    assert_eq!(metric(&running.registry, &invalid), 1.0);
}

#[tokio::test]
async fn queue_depth_and_the_oldest_item_are_observable_while_decisions_wait() {
    let fixture = fixture("v1beta1").await;
    create(&fixture, pcr("req-1", SIGNER));
    create(&fixture, pcr("req-2", SIGNER));
    // The CA is down for a long while: both PCRs stay queued.
    let down = Outcome::Requeue {
        reason: "CA down".to_owned(),
        after: Duration::from_secs(3600),
    };
    let double = Double::scripted("replica-a", Vec::new(), down, None);
    let running = start(&fixture, &[SIGNER], double.clone());
    double
        .until("both PCRs requeued", |d| d.seen_names().len() == 2)
        .await;
    assert_eq!(
        metric(&running.registry, "warrant_podcert_queue_depth"),
        2.0
    );
    let oldest = series(&running.registry, "warrant_podcert_queue_oldest_seconds");
    assert!(oldest.is_some_and(|age| age >= 0.0), "{oldest:?}");
}

#[tokio::test]
async fn signer_names_warrant_may_not_own_are_refused_at_start() {
    let fixture = fixture("v1beta1").await;
    for names in [vec!["kubernetes.io/kube-apiserver-client-pod"], vec![]] {
        let config = Config {
            signer_names: names.iter().map(|s| (*s).to_owned()).collect(),
            ..Config::default()
        };
        let result = Controller::new(
            client(&fixture),
            config,
            Double::issuing("x"),
            &mut prometheus_client::registry::Registry::default(),
        );
        assert!(matches!(result, Err(Error::SignerName(_))), "{names:?}");
    }
}
