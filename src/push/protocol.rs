//! What differs between the two protocols a window is pushed with (`--push-format`):
//! Pyroscope's `/ingest` (a gzipped pprof per sample type, the series in the query)
//! and OTLP/HTTP (`POST /v1development/profiles`, one gzipped
//! `ExportProfilesServiceRequest` of [`crate::output::otlp`] per window, the series in
//! the resource attributes). Each has its bodies, its headers, its statuses worth a
//! retry and its replies: OTLP's 2xx reply may say that part of the request was
//! rejected (partial success), and its error replies carry a `google.rpc.Status`.
//! Both honour a `Retry-After` of seconds on a reply that is retried.

use std::io::Write;
use std::time::Duration;

use flate2::Compression;
use flate2::write::GzEncoder;

use super::queue::{Outcome, outcome};
use crate::format::Recording;
use crate::output::protobuf::{Field, fields};
use crate::output::{otlp, pprof};
use crate::profile::{Profile, ProfileOptions};

/// The protocol profiles are pushed with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PushFormat {
    /// Pyroscope's HTTP ingest (`/ingest`, pprof), which Grafana Pyroscope and
    /// Alloy's `pyroscope.receive_http` read.
    #[default]
    Pyroscope,
    /// OTLP/HTTP profiles (`/v1development/profiles`, protobuf), which the
    /// OpenTelemetry Collector (port 4318) and other OTLP receivers read.
    Otlp,
}

impl PushFormat {
    /// The path appended to the base URL.
    pub fn path(self) -> &'static str {
        match self {
            PushFormat::Pyroscope => "/ingest",
            PushFormat::Otlp => "/v1development/profiles",
        }
    }

    /// The headers that say what the body is.
    pub(super) fn content_headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            PushFormat::Pyroscope => &[("Content-Type", "application/octet-stream")],
            PushFormat::Otlp => &[
                ("Content-Type", "application/x-protobuf"),
                ("Content-Encoding", "gzip"),
            ],
        }
    }

    /// What to do after a status. OTLP/HTTP retries 429, 502, 503 and 504 only (the
    /// specification's list); Pyroscope's ingest every 5xx, 408, 425 and 429.
    pub(super) fn outcome(self, status: u16) -> Outcome {
        match (self, status) {
            (PushFormat::Pyroscope, s) => outcome(s),
            (PushFormat::Otlp, 200..=299) => Outcome::Sent,
            (PushFormat::Otlp, 429 | 502 | 503 | 504) => Outcome::Retry,
            (PushFormat::Otlp, _) => Outcome::Reject,
        }
    }

    /// What to do about a refused request.
    pub(super) fn hint(self, status: u16) -> &'static str {
        match (self, status) {
            (_, 401 | 403) => {
                "\nhint: check the credentials (--push-header 'Authorization: Bearer TOKEN', or user:password@ in the URL)"
            }
            (PushFormat::Pyroscope, 404) => {
                "\nhint: is this a Pyroscope server or Alloy's pyroscope.receive_http? It has no /ingest \
                 (for an OpenTelemetry Collector, give --push-format otlp)"
            }
            (PushFormat::Otlp, 404) => {
                "\nhint: is this an OTLP/HTTP receiver with profiles enabled (the Collector's otlp \
                 receiver on port 4318, with the profiles feature gate)? It has no /v1development/profiles"
            }
            (PushFormat::Otlp, 413) => {
                "\nhint: the receiver's request size limit is smaller than a window: a shorter \
                 --push-interval makes them smaller"
            }
            (PushFormat::Pyroscope, 413 | 422) => {
                "\nhint: the server could not take the profile (Pyroscope answers 422 to one over \
                 its size or sample limits, validation.max-profile-size-bytes and \
                 max-profile-stacktrace-samples): a shorter --push-interval makes them smaller"
            }
            (_, 300..=399) => "\nhint: the server redirects: give the URL it redirects to",
            _ => "",
        }
    }
}

/// What a window is sent as, besides the bodies: the service and the labels.
pub(super) struct Series<'a> {
    /// The service name.
    pub service: &'a str,
    /// Labels: Pyroscope's in the query's name, OTLP's as resource attributes.
    pub labels: &'a [(String, String)],
}

/// A recording's bodies, sent in order: for Pyroscope one gzipped pprof (with
/// off-CPU intervals, the CPU profile without them, then the wall-time one); for
/// OTLP one gzipped request holding every sample type.
pub(super) fn bodies(format: PushFormat, rec: &Recording, series: &Series) -> Vec<Vec<u8>> {
    match format {
        PushFormat::Pyroscope => {
            let mut parts = Vec::new();
            if rec.meta.off_cpu {
                // The CPU profile (Pyroscope's `process_cpu`) without the off-CPU
                // intervals, then the wall-time one (`wall`) with them.
                let mut cpu = rec.clone();
                cpu.off_cpu.clear();
                cpu.meta.off_cpu = false;
                parts.push(pprof_body(&cpu));
            }
            parts.push(pprof_body(rec));
            parts
        }
        PushFormat::Otlp => {
            let profile = Profile::from_recording(rec, ProfileOptions::default());
            let o = otlp::OtlpOptions {
                service: Some(series.service.to_owned()),
                attributes: series
                    .labels
                    .iter()
                    .filter_map(|(k, v)| {
                        // The resource names the container itself (container.id).
                        let key = match k.as_str() {
                            "container_id" => return None,
                            "pod_uid" => "k8s.pod.uid",
                            k => k,
                        };
                        Some((key.to_owned(), v.clone()))
                    })
                    .collect(),
                ..Default::default()
            };
            let mut gz = GzEncoder::new(Vec::new(), Compression::default());
            // Writing into a Vec cannot fail.
            let _ = gz.write_all(&otlp::encode(&profile, &o));
            vec![gz.finish().unwrap_or_default()]
        }
    }
}

/// A recording as gzipped pprof.
fn pprof_body(rec: &Recording) -> Vec<u8> {
    let profile = Profile::from_recording(rec, ProfileOptions::default());
    let mut bytes = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = pprof::write(&profile, &mut bytes);
    bytes
}

/// The longest `Retry-After` honoured: a server asking for more is asked again then
/// (later windows wait meanwhile, and the queue's bound holds).
pub(super) const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);

/// A `Retry-After` value of seconds, at most [`RETRY_AFTER_MAX`]; None for a date or
/// anything else.
pub(super) fn retry_after(value: &str) -> Option<Duration> {
    let secs: u64 = value.trim().parse().ok()?;
    Some(Duration::from_secs(secs).min(RETRY_AFTER_MAX))
}

/// What an OTLP 2xx reply (`ExportProfilesServiceResponse`) says was rejected: the
/// number of profiles and the server's message. None when all was accepted, or the
/// reply is not such a message (an empty body is full success).
pub(super) fn partial_success(body: &[u8]) -> Option<(u64, String)> {
    let partial = fields(body).ok()?.into_iter().find_map(|f| match f {
        Field::Bytes(1, b) => Some(b),
        _ => None,
    })?;
    let mut rejected = 0;
    let mut message = String::new();
    for f in fields(partial).ok()? {
        match f {
            Field::Varint(1, n) => rejected = n,
            Field::Bytes(2, m) => message = String::from_utf8_lossy(m).into_owned(),
            _ => {}
        }
    }
    (rejected > 0 || !message.is_empty()).then_some((rejected, message))
}

/// The message of a `google.rpc.Status` (an OTLP error reply's body): field 2.
pub(super) fn status_message(body: &[u8]) -> Option<String> {
    fields(body).ok()?.into_iter().find_map(|f| match f {
        Field::Bytes(2, m) => std::str::from_utf8(m).ok().map(str::to_owned),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::protobuf::Pb;

    #[test]
    fn otlp_retries_only_what_the_specification_lists() {
        for (s, o) in [
            (200, Outcome::Sent),
            (400, Outcome::Reject),
            (404, Outcome::Reject),
            (413, Outcome::Reject),
            (500, Outcome::Reject),
            (429, Outcome::Retry),
            (502, Outcome::Retry),
            (503, Outcome::Retry),
            (504, Outcome::Retry),
        ] {
            assert_eq!(PushFormat::Otlp.outcome(s), o, "{s}");
        }
        assert_eq!(PushFormat::Pyroscope.outcome(500), Outcome::Retry);
    }

    #[test]
    fn retry_after_takes_seconds_and_caps_them() {
        assert_eq!(retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(" 0 "), Some(Duration::ZERO));
        assert_eq!(retry_after("86400"), Some(RETRY_AFTER_MAX));
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(retry_after("-1"), None);
    }

    #[test]
    fn partial_success_and_status_replies_are_read_and_junk_is_not() {
        let mut ps = Pb::default();
        ps.int(1, 2);
        ps.bytes(2, b"2 profiles had no samples");
        let mut reply = Pb::default();
        reply.message(1, &ps);
        assert_eq!(
            partial_success(&reply.0),
            Some((2, "2 profiles had no samples".into()))
        );
        assert_eq!(partial_success(&[]), None, "an empty reply is full success");
        let mut empty = Pb::default();
        empty.message(1, &Pb::default());
        assert_eq!(partial_success(&empty.0), None);
        assert_eq!(partial_success(b"<html>oops</html>"), None);
        let mut status = Pb::default();
        status.int(1, 3);
        status.bytes(2, b"bad profile");
        assert_eq!(status_message(&status.0), Some("bad profile".into()));
        assert_eq!(status_message(&[0xff; 9]), None);
    }
}
