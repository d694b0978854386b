//! What the binary's suites share: the binary itself, a running `agency serve`, an HTTP client.
#![allow(dead_code, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub mod mqtt;

/// The demo agency's answer to any message.
pub fn studio_answer(message: &str) -> String {
    format!(
        "Here is your reviewed build. Approved: Please review: fn main() {{ /* Please build: {message} */ }}"
    )
}

/// The binary, with nothing from this machine's environment that it reads.
pub fn agency() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agency"));
    for var in [
        "AGENCY_DB",
        "AGENCY_LISTEN",
        "AGENCY_LOG",
        "AGENCY_LOG_FORMAT",
        "AGENCY_METRICS_LISTEN",
        "AGENCY_OWNER",
        "RUST_LOG",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_SERVICE_NAME",
        "OTEL_SDK_DISABLED",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    ] {
        cmd.env_remove(var);
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// A running `agency serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
    pub lines: mpsc::Receiver<String>,
}

impl Server {
    /// Starts `cmd` (a `serve` command) and waits for its "listening" line.
    pub fn start(cmd: Command) -> Self {
        Self::start_logging(cmd, Stdio::piped())
    }

    /// As [`Server::start`], its logs (stderr) going to `logs`.
    pub fn start_logging(mut cmd: Command, logs: Stdio) -> Self {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(logs);
        let mut child = cmd.spawn().expect("spawn agency serve");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Self {
            child,
            url: String::new(),
            lines,
        };
        let first = |lines: &mpsc::Receiver<String>| loop {
            match lines.recv_timeout(Duration::from_secs(60)) {
                // The embedded MQTT broker's address, when one is started, comes first.
                Ok(line) if line.starts_with("agency: MQTT broker on ") => {}
                other => return other,
            }
        };
        let line = match first(&server.lines) {
            Ok(line) => line,
            Err(e) => {
                let _ = server.child.kill();
                let mut stderr = String::new();
                if let Some(mut s) = server.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut s, &mut stderr);
                }
                panic!("no `listening` line from agency serve ({e}); stderr:\n{stderr}");
            }
        };
        let addr = line
            .strip_prefix("agency: listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line: {line}"));
        let addr: std::net::SocketAddr = addr.parse().expect("an address");
        assert!(addr.ip().is_loopback(), "listening on {addr}");
        assert_ne!(addr.port(), 0);
        server.url = format!("http://{addr}");
        server
    }

    /// The rest of the first line the server prints after `prefix` (lines before it are
    /// dropped), e.g. `printed("agency: metrics on ")`.
    pub fn printed(&self, prefix: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("no line starting {prefix:?} from the server: {e}"));
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.to_string();
            }
        }
    }

    /// Waits (a while) for the server to exit.
    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.child.try_wait().expect("poll the server") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client for loopback servers.
pub fn http() -> reqwest::Client {
    // Loopback only: never through a proxy from the machine's environment.
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

/// A client of a new account made on the server at `url` (ada@example.com): its session
/// cookie and CSRF token on every request, and no overall timeout (streams stay open).
pub async fn signed_up(url: &str) -> reqwest::Client {
    let res = http()
        .post(format!("{url}/api/auth/signup"))
        .json(
            &serde_json::json!({ "email": "ada@example.com", "password": "correct horse battery" }),
        )
        .send()
        .await
        .expect("sign up");
    assert_eq!(res.status(), 201, "sign-up");
    let cookie = res.headers()["set-cookie"]
        .to_str()
        .expect("a cookie")
        .split(';')
        .next()
        .expect("a cookie")
        .to_string();
    let me: serde_json::Value = res.json().await.expect("the account");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("cookie", cookie.parse().expect("a header value"));
    headers.insert(
        "x-csrf-token",
        me["csrf_token"]
            .as_str()
            .expect("a CSRF token")
            .parse()
            .expect("a header value"),
    );
    reqwest::Client::builder()
        .no_proxy()
        .default_headers(headers)
        .build()
        .expect("an HTTP client")
}
