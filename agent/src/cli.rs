//! The command line. Every flag also reads an environment variable `NODE_DOCTOR_<FLAG>`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::scheduler::parse_duration;

/// Exit code for bad usage (sysexits `EX_USAGE`), instead of clap's 2, which `check` uses
/// for "a critical finding".
pub const EXIT_USAGE: i32 = 64;

#[derive(Debug, Parser)]
#[command(
    name = "node-doctor",
    version,
    about = "Per-node Kubernetes diagnostics: explains node failures with evidence and the handbook's remediation",
    propagate_version = true
)]
pub struct Cli {
    /// Where the host's `/` is mounted (`/host` in a pod).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_HOST_ROOT",
        default_value = "/",
        value_name = "DIR"
    )]
    pub host_root: PathBuf,

    /// The Kubernetes node name used in findings and commands (default: $NODE_NAME, else the
    /// host's hostname).
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_NODE_NAME",
        value_name = "NAME"
    )]
    pub node_name: Option<String>,

    /// Run only these collectors (repeat, or comma-separated).
    #[arg(
        long = "collector",
        global = true,
        env = "NODE_DOCTOR_COLLECTOR",
        value_delimiter = ',',
        value_name = "NAME"
    )]
    pub collectors: Vec<String>,

    /// How long one collector run may take before it is reported as timed out
    /// (default: the smaller of its interval and 10s).
    #[arg(long, global = true, env = "NODE_DOCTOR_COLLECTOR_TIMEOUT", value_parser = parse_duration, value_name = "DURATION")]
    pub collector_timeout: Option<Duration>,

    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        env = "NODE_DOCTOR_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// Log level or tracing filter (`info`, `debug`, `node_doctor=debug`) [default: info for
    /// serve, error for check, whose report is on stdout].
    #[arg(long, global = true, env = "NODE_DOCTOR_LOG_LEVEL", value_parser = parse_log_level, value_name = "LEVEL")]
    pub log_level: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run continuously and serve /findings, /metrics, /healthz, /readyz and / over HTTP.
    Serve(ServeArgs),
    /// Sample the host twice, print a report and exit 0 (nothing above info), 1 (a
    /// warning), 2 (a critical finding) or 3 (node-doctor itself failed).
    Check(CheckArgs),
    // `explain` is wired in here by its own change (agent/src/explain_cmd.rs).
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "NODE_DOCTOR_LISTEN",
        default_value = "0.0.0.0:9808",
        value_name = "ADDR"
    )]
    pub listen: SocketAddr,

    /// How often every collector runs.
    #[arg(long, env = "NODE_DOCTOR_INTERVAL", default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,

    /// Per-collector interval, e.g. `disk=60s` (repeat, or comma-separated).
    #[arg(
        long = "collector-interval",
        env = "NODE_DOCTOR_COLLECTOR_INTERVAL",
        value_delimiter = ',',
        value_parser = parse_named_duration,
        value_name = "NAME=DURATION"
    )]
    pub collector_intervals: Vec<(String, Duration)>,

    /// File holding a bearer token; when set, /findings, /metrics and / require
    /// `Authorization: Bearer <token>` (/healthz and /readyz stay open).
    #[arg(long, env = "NODE_DOCTOR_AUTH_TOKEN_FILE", value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Output format: a table for a person, or the /findings JSON document.
    #[arg(long, env = "NODE_DOCTOR_FORMAT", value_enum, default_value = "table")]
    pub format: Format,

    /// Time between the two samples (rates need two).
    #[arg(long, env = "NODE_DOCTOR_INTERVAL", default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,

    /// Language of titles, summaries and remediation steps.
    #[arg(long, env = "NODE_DOCTOR_LANG", value_enum, default_value = "en")]
    pub lang: LangArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LangArg {
    En,
    Zh,
}

impl From<LangArg> for collectors::Lang {
    fn from(l: LangArg) -> Self {
        match l {
            LangArg::En => collectors::Lang::En,
            LangArg::Zh => collectors::Lang::Zh,
        }
    }
}

fn parse_named_duration(s: &str) -> Result<(String, Duration), String> {
    let (name, d) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=DURATION, e.g. disk=60s"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("{s:?}: missing collector name"));
    }
    Ok((name.to_string(), parse_duration(d)?))
}

fn parse_log_level(s: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("node-doctor").chain(args.iter().copied()))
    }

    #[test]
    fn defaults() {
        let cli = parse(&["serve"]).unwrap();
        assert_eq!(cli.host_root, PathBuf::from("/"));
        match cli.command {
            Command::Serve(s) => {
                assert_eq!(s.listen, "0.0.0.0:9808".parse().unwrap());
                assert_eq!(s.interval, Duration::from_secs(15));
                assert!(s.auth_token_file.is_none());
            }
            _ => panic!("serve"),
        }
        let cli = parse(&["check"]).unwrap();
        match cli.command {
            Command::Check(c) => {
                assert_eq!(c.format, Format::Table);
                assert_eq!(c.interval, Duration::from_secs(1));
                assert_eq!(c.lang, LangArg::En);
            }
            _ => panic!("check"),
        }
    }

    #[test]
    fn flags_parse() {
        let cli = parse(&[
            "serve",
            "--host-root",
            "/host",
            "--collector",
            "disk,load",
            "--collector",
            "memory",
            "--collector-interval",
            "disk=60s",
            "--collector-timeout",
            "2s",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(cli.collectors, vec!["disk", "load", "memory"]);
        assert_eq!(cli.collector_timeout, Some(Duration::from_secs(2)));
        match cli.command {
            Command::Serve(s) => assert_eq!(
                s.collector_intervals,
                vec![("disk".to_string(), Duration::from_secs(60))]
            ),
            _ => panic!("serve"),
        }
    }

    #[test]
    fn bad_values_are_errors() {
        for args in [
            &["check", "--format", "xml"][..],
            &["check", "--interval", "soon"],
            &["serve", "--listen", "nowhere"],
            &["serve", "--collector-interval", "disk"],
            &["check", "--log-level", "a=b=c"],
            &["frobnicate"],
            &[],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }
}
