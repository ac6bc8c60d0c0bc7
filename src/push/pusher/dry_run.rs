//! `--push-dry-run`: each request written into a directory instead of sent, the
//! body as it would go (gzipped) and a `.query` file with its request line and
//! labels, so labels and series can be checked before pointing at a real server.

use super::{PushFormat, Worker};

impl Worker {
    /// `--push-dry-run`: writes one request as `NNNNNN-APP.pprof` (and
    /// `NNNNNN-APP.wall.pprof` for the wall-time part), or `NNNNNN-APP.otlp.pb.gz`,
    /// and `NNNNNN-APP.query`.
    pub(super) fn write_dry_run(
        &mut self,
        dir: &std::path::Path,
        app: &str,
        name: &str,
        query: &str,
        parts: &[Vec<u8>],
        samples: u64,
    ) {
        self.written += 1;
        let stem = format!("{:06}-{app}", self.written);
        let file = |ext: &str| dir.join(format!("{stem}.{ext}"));
        let mut text = match self.format {
            PushFormat::Pyroscope => {
                format!("POST {}?{query}\nname={name}\n", self.endpoint.ingest)
            }
            PushFormat::Otlp => format!("POST {}\nservice.name={app}\n", self.endpoint.ingest),
        };
        let otlp = self.format == PushFormat::Otlp;
        for (i, p) in parts.iter().enumerate() {
            let kind = match i {
                _ if otlp => "otlp",
                0 => "cpu",
                _ => "wall",
            };
            text.push_str(&format!("body {kind}: {} bytes\n", p.len()));
        }
        let mut result = std::fs::write(file("query"), text);
        for (i, p) in parts.iter().enumerate() {
            let path = if otlp {
                file("otlp.pb.gz")
            } else if i == 0 {
                file("pprof")
            } else {
                file("wall.pprof")
            };
            result = result.and(std::fs::write(path, p));
        }
        match result {
            Ok(()) => {
                self.stats.sent += 1;
                self.stats.samples += samples;
                self.stats.bytes += parts.iter().map(|p| p.len() as u64).sum::<u64>();
            }
            Err(e) => {
                self.stats.rejected += 1;
                let detail = format!("cannot write into {}: {e}", dir.display());
                if !self.reported.contains(&detail) {
                    eprintln!(
                        "profile: push: error: --push-dry-run {}",
                        crate::text::terminal_line(&detail)
                    );
                    self.reported.push(detail.clone());
                }
                self.stats.last_error = Some(detail);
            }
        }
    }
}
