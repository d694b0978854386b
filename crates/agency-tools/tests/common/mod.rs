//! Finding the stock MCP servers `tests/mcp/install` put in `target/mcp` (or
//! `$AGENCY_MCP_DIR`), and starting them.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agency_core::tool::{McpServer, McpTransport};

pub struct Servers {
    dir: PathBuf,
}

/// The installed servers; `None` (after saying why) when they are missing on a developer's
/// machine. Under `CI=true` a missing server fails the test instead.
pub fn servers() -> Option<Servers> {
    let dir = std::env::var_os("AGENCY_MCP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp"));
    let servers = Servers { dir };
    let missing: Vec<PathBuf> = [
        servers.everything_script(),
        servers.filesystem_script(),
        servers.time_bin(),
    ]
    .into_iter()
    .filter(|p| !p.exists())
    .collect();
    if missing.is_empty() {
        return Some(servers);
    }
    let message = format!(
        "the stock MCP servers are not installed ({} missing): run tests/mcp/install",
        missing[0].display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}");
    }
    eprintln!("skipped: {message}");
    None
}

impl Servers {
    fn everything_script(&self) -> PathBuf {
        self.dir
            .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    }

    fn filesystem_script(&self) -> PathBuf {
        self.dir
            .join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
    }

    fn time_bin(&self) -> PathBuf {
        self.dir.join("venv/bin/mcp-server-time")
    }

    /// server-everything on stdio.
    pub fn everything(&self) -> McpServer {
        stdio(
            "node",
            &[self.everything_script().to_str().unwrap(), "stdio"],
        )
    }

    /// server-everything on stdio, started through a shell that writes its process id to
    /// `pid_file` first (the shell then becomes the server: `exec`).
    pub fn everything_with_pid(&self, pid_file: &Path) -> McpServer {
        let script = format!(
            "echo $$ > '{}'; exec node '{}' stdio",
            pid_file.display(),
            self.everything_script().display()
        );
        stdio("sh", &["-c", &script])
    }

    /// server-everything on stdio behind a wrapper, as `npx` or a shell script starts one: a
    /// shell that writes its process id to `pid_file`, leaves a child behind that ignores
    /// `SIGTERM`, and runs the server as its own child (not `exec`), so the server is a
    /// grandchild of this process.
    pub fn everything_wrapped(&self, pid_file: &Path) -> McpServer {
        let script = format!(
            "echo $$ > '{}'; (trap '' TERM; exec sleep 300) >/dev/null 2>&1 & node '{}' stdio; true",
            pid_file.display(),
            self.everything_script().display()
        );
        stdio("sh", &["-c", &script])
    }

    /// server-filesystem allowed to read `root`.
    pub fn filesystem(&self, root: &Path) -> McpServer {
        stdio(
            "node",
            &[
                self.filesystem_script().to_str().unwrap(),
                root.to_str().unwrap(),
            ],
        )
    }

    /// mcp-server-time (Python).
    pub fn time(&self) -> McpServer {
        stdio(
            self.time_bin().to_str().unwrap(),
            &["--local-timezone", "UTC"],
        )
    }

    fn python(&self) -> PathBuf {
        self.dir.join("venv/bin/python")
    }

    /// `tests/mcp/dynamic_server.py` (the Python SDK's server, 2026-07-28) on stdio.
    pub fn dynamic(&self) -> McpServer {
        stdio(
            self.python().to_str().unwrap(),
            &[dynamic_script().to_str().unwrap(), "stdio"],
        )
    }

    /// `tests/mcp/dynamic_server.py` on stateless Streamable HTTP.
    pub fn dynamic_http(&self) -> HttpServer {
        let port = free_port();
        let child = std::process::Command::new(self.python())
            .arg(dynamic_script())
            .args(["http", &port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        HttpServer::started(child, port)
    }

    /// server-everything serving Streamable HTTP on a free loopback port; stopped when the
    /// returned guard drops.
    pub fn everything_http(&self) -> HttpServer {
        self.everything_http_on(free_port())
    }

    /// server-everything serving Streamable HTTP on `port`.
    pub fn everything_http_on(&self, port: u16) -> HttpServer {
        let child = std::process::Command::new("node")
            .arg(self.everything_script())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        HttpServer::started(child, port)
    }
}

fn dynamic_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/dynamic_server.py")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct HttpServer {
    child: std::process::Child,
    pub port: u16,
}

impl HttpServer {
    /// Waits until `child` listens on `port`.
    fn started(child: std::process::Child, port: u16) -> Self {
        let server = HttpServer { child, port };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn stdio(command: &str, args: &[&str]) -> McpServer {
    McpServer::new(McpTransport::Stdio {
        command: command.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: BTreeMap::new(),
    })
}

pub fn http(url: &str) -> McpServer {
    McpServer::new(McpTransport::Http {
        url: url.into(),
        headers_env: BTreeMap::new(),
    })
}
