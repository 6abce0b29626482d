//! Running wrk (Debian's package) with a Lua script per scenario, and reading its report.

use std::process::Command;

use crate::{Error, Target};

/// What is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scenario {
    /// `GET /version`, authenticated as the others are: the transport floor, what a request
    /// costs with no work behind it.
    Floor,
    /// TokenRequest for a service account, no binding.
    RequestPlain,
    /// TokenRequest bound to a pod (pod and node looked up).
    RequestPod,
    /// TokenReview of pod-bound tokens, each used once (every review verifies a signature).
    ReviewDistinct,
    /// TokenReview of one token over and over (the verified-signature cache's case).
    ReviewRepeated,
    /// Pod-bound TokenRequests and TokenReviews of distinct tokens, taking turns (the soak's
    /// good clients).
    Mixed,
}

impl Scenario {
    /// In the order measured: the floor first (the limits of the others need it), repeated
    /// reviews before distinct ones (their rate sizes the distinct tokens' supply).
    pub(crate) const ALL: [Scenario; 5] = [
        Scenario::Floor,
        Scenario::RequestPlain,
        Scenario::RequestPod,
        Scenario::ReviewRepeated,
        Scenario::ReviewDistinct,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Scenario::Floor => "floor",
            Scenario::RequestPlain => "tokenrequest-plain",
            Scenario::RequestPod => "tokenrequest-pod",
            Scenario::ReviewDistinct => "tokenreview-distinct",
            Scenario::ReviewRepeated => "tokenreview-repeated",
            Scenario::Mixed => "mixed",
        }
    }

    /// One request's path and body (none for a GET), for the preflight check.
    pub(crate) fn sample(self, dir: &std::path::Path) -> Result<(String, Option<String>), Error> {
        let (path, body) = match self {
            Scenario::Floor => return Ok(("/version".into(), None)),
            Scenario::RequestPlain => (
                "/api/v1/namespaces/bench/serviceaccounts/sa-0/token".into(),
                r#"{"spec":{"audiences":["vault"]}}"#.into(),
            ),
            Scenario::RequestPod => (
                "/api/v1/namespaces/bench/serviceaccounts/sa-0/token".into(),
                r#"{"spec":{"audiences":["vault"],"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"pod-0"}}}"#.into(),
            ),
            Scenario::ReviewDistinct | Scenario::ReviewRepeated | Scenario::Mixed => {
                // The last token of the second file: not one the run will use first.
                let tokens = std::fs::read_to_string(dir.join("review-tokens.1"))?;
                let token = tokens.lines().last().unwrap_or_default().to_owned();
                (REVIEW_PATH.into(), review_body(&token))
            }
        };
        Ok((path, Some(body)))
    }

    fn script(self) -> &'static str {
        match self {
            Scenario::Floor => FLOOR_LUA,
            Scenario::RequestPlain | Scenario::RequestPod => TOKEN_REQUEST_LUA,
            Scenario::ReviewDistinct => REVIEW_DISTINCT_LUA,
            Scenario::ReviewRepeated => REVIEW_REPEATED_LUA,
            Scenario::Mixed => MIXED_LUA,
        }
    }
}

pub(crate) const REVIEW_PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

pub(crate) fn review_body(token: &str) -> String {
    format!(
        r#"{{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{{"token":"{token}"}}}}"#
    )
}

/// Each wrk thread gets an id from `setup`, which runs in wrk's main thread once per thread.
const THREAD_IDS: &str = r#"
local next_id = 0
function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end
"#;

const FLOOR_LUA: &str = r#"
local request_bytes
function init(args)
  request_bytes = wrk.format("GET", "/version", { ["Authorization"] = "Bearer " .. os.getenv("BENCH_ADMIN") })
end
function request()
  return request_bytes
end
"#;

const TOKEN_REQUEST_LUA: &str = r#"
local counter
local pods = tonumber(os.getenv("BENCH_PODS"))
local sas = tonumber(os.getenv("BENCH_SAS"))
local bound = os.getenv("BENCH_BOUND") == "1"
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. os.getenv("BENCH_ADMIN") }
function init(args)
  counter = id * 7919
end
function request()
  counter = counter + 1
  local pod = counter % pods
  local path = "/api/v1/namespaces/bench/serviceaccounts/sa-" .. (pod % sas) .. "/token"
  local body
  if bound then
    body = '{"spec":{"audiences":["vault"],"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"pod-' .. pod .. '"}}}'
  else
    body = '{"spec":{"audiences":["vault"]}}'
  end
  return wrk.format("POST", path, headers, body)
end
"#;

const REVIEW_DISTINCT_LUA: &str = r#"
local file
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. os.getenv("BENCH_ADMIN") }
function init(args)
  file = io.open(os.getenv("BENCH_TOKENS") .. "." .. (id % 2), "r")
end
function request()
  local token = file:read("*l")
  if token == nil then
    file:seek("set", 0)
    token = file:read("*l")
  end
  return wrk.format("POST", "/apis/authentication.k8s.io/v1/tokenreviews", headers,
    '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"' .. token .. '"}}')
end
"#;

const REVIEW_REPEATED_LUA: &str = r#"
local request_bytes
function init(args)
  local file = io.open(os.getenv("BENCH_TOKENS") .. ".1", "r")
  local token = file:read("*l")
  file:close()
  request_bytes = wrk.format("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
    { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. os.getenv("BENCH_ADMIN") },
    '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"' .. token .. '"}}')
end
function request()
  return request_bytes
end
"#;

const MIXED_LUA: &str = r#"
local counter
local file
local pods = tonumber(os.getenv("BENCH_PODS"))
local sas = tonumber(os.getenv("BENCH_SAS"))
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. os.getenv("BENCH_ADMIN") }
function init(args)
  counter = id * 7919
  file = io.open(os.getenv("BENCH_TOKENS") .. "." .. (id % 2), "r")
end
function request()
  counter = counter + 1
  if counter % 2 == 0 then
    local pod = counter % pods
    return wrk.format("POST", "/api/v1/namespaces/bench/serviceaccounts/sa-" .. (pod % sas) .. "/token", headers,
      '{"spec":{"audiences":["vault"],"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"pod-' .. pod .. '"}}}')
  end
  local token = file:read("*l")
  if token == nil then
    file:seek("set", 0)
    token = file:read("*l")
  end
  return wrk.format("POST", "/apis/authentication.k8s.io/v1/tokenreviews", headers,
    '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"' .. token .. '"}}')
end
"#;

/// One measurement.
pub(crate) struct Run {
    pub(crate) scenario: Scenario,
    pub(crate) connections: u32,
    pub(crate) seconds: u64,
}

/// What wrk reported.
pub(crate) struct Outcome {
    pub(crate) requests: u64,
    pub(crate) seconds: f64,
    pub(crate) requests_per_second: f64,
    pub(crate) p50: String,
    pub(crate) p99: String,
    pub(crate) errors: u64,
}

pub(crate) fn check_installed() -> Result<(), Error> {
    match Command::new("wrk").arg("--version").output() {
        Ok(_) => Ok(()),
        Err(_) => Err(
            "wrk is not installed (Debian: apt-get install wrk); `make bench` installs it".into(),
        ),
    }
}

pub(crate) fn run(target: &Target, run: &Run) -> Result<Outcome, Error> {
    let script = target.dir.join(format!("{}.lua", run.scenario.name()));
    std::fs::write(&script, format!("{THREAD_IDS}{}", run.scenario.script()))?;
    let threads = run.connections.min(2);
    let pods = std::fs::read_to_string(target.dir.join("objects.yaml"))?
        .matches("kind: Pod")
        .count();
    let sas = std::fs::read_to_string(target.dir.join("objects.yaml"))?
        .matches("kind: ServiceAccount")
        .count();
    let out = Command::new("wrk")
        .args([
            "-t",
            &threads.to_string(),
            "-c",
            &run.connections.to_string(),
        ])
        .args([
            "-d",
            &format!("{}s", run.seconds),
            "--latency",
            "--timeout",
            "10s",
            "-s",
        ])
        .arg(&script)
        .arg(format!("{}/", target.base))
        .env("BENCH_ADMIN", &target.admin)
        .env("BENCH_TOKENS", target.dir.join("review-tokens"))
        .env("BENCH_PODS", pods.to_string())
        .env("BENCH_SAS", sas.to_string())
        .env(
            "BENCH_BOUND",
            if run.scenario == Scenario::RequestPod {
                "1"
            } else {
                "0"
            },
        )
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "wrk failed: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    parse(&text).ok_or_else(|| format!("cannot read wrk's report:\n{text}").into())
}

/// Reads wrk's text report.
fn parse(text: &str) -> Option<Outcome> {
    let mut requests = None;
    let mut seconds = None;
    let mut rate = None;
    let (mut p50, mut p99) = (None, None);
    let mut errors = 0;
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["50%", value] => p50 = Some((*value).to_owned()),
            ["99%", value] => p99 = Some((*value).to_owned()),
            ["Requests/sec:", value] => rate = value.parse().ok(),
            [count, "requests", "in", duration, ..] => {
                requests = count.parse().ok();
                // wrk writes the run's length as `5.00s`, or `1.00m` from a minute on.
                let duration = duration.trim_end_matches(',');
                seconds = match duration.strip_suffix('m') {
                    Some(minutes) => minutes.parse::<f64>().ok().map(|m| m * 60.0),
                    None => duration.trim_end_matches('s').parse().ok(),
                };
            }
            ["Non-2xx", "or", "3xx", "responses:", count] => {
                errors += count.parse::<u64>().unwrap_or(0)
            }
            ["Socket", "errors:", rest @ ..] => {
                errors += rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok())
                    .sum::<u64>();
            }
            _ => {}
        }
    }
    Some(Outcome {
        requests: requests?,
        seconds: seconds?,
        requests_per_second: rate?,
        p50: p50?,
        p99: p99?,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_wrk_report() {
        let report = "Running 5s test @ https://127.0.0.1:8443/
  2 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.23ms    0.50ms  20.00ms   90.00%
    Req/Sec     3.20k   100.00     3.40k    70.00%
  Latency Distribution
     50%    1.10ms
     75%    1.30ms
     90%    1.60ms
     99%    3.45ms
  31234 requests in 5.00s, 30.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:   6246.80
Transfer/sec:      6.00MB
";
        let o = parse(report).unwrap();
        assert_eq!(o.requests, 31234);
        assert_eq!(o.seconds, 5.0);
        assert_eq!(o.requests_per_second, 6246.8);
        assert_eq!((o.p50.as_str(), o.p99.as_str()), ("1.10ms", "3.45ms"));
        assert_eq!(o.errors, 7);
        let minute = report.replace("5.00s,", "1.00m,");
        assert_eq!(parse(&minute).unwrap().seconds, 60.0);
    }
}
