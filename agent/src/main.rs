//! `node-doctor`: the agent binary (CLI, scheduler, state, HTTP server).

#[cfg(test)]
mod alone;
mod api;
mod cli;
mod connections;
mod dns_probe;
mod engine;
mod exit;
mod explain_cmd;
mod fleet;
mod heap;
mod history;
mod html;
mod human;
mod image;
// The import-circle check both crates run on their own `src/` (ARCHITECTURE.md, "Module
// layers"): the collectors crate's file, included here by path.
#[cfg(test)]
#[path = "../../collectors/src/imports.rs"]
mod imports;
mod kube;
mod kube_stats;
mod links;
mod markup;
mod metrics;
mod netns;
mod plot;
mod probe;
mod reach_probe;
mod rules_page;
mod scheduler;
mod server;
mod state;
mod table;
mod timefmt;
mod token;
mod view;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use collectors::rules::RuleBook;
use collectors::{CollectContext, HostPaths};

use cli::{CheckArgs, Cli, Command, Format, LogFormat, ServeArgs, EXIT_USAGE};
use collectors::registry::Options as CollectorOptions;
use engine::{Plan, Shared, Stop};
use state::State;
use view::{Filter, View};

use exit::AGENT_FAILED as EXIT_AGENT_FAILED;

fn main() -> ExitCode {
    heap::one_arena();
    let cli = match parse_cli() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            let _ = e.print();
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
                _ => ExitCode::from(EXIT_USAGE as u8),
            };
        }
    };
    init_logging(&cli);
    if let Command::Explain(args) = cli.command {
        return explain(args, &cli.rules_files, &cli.tuning);
    }
    if let Command::Fleet(args) = &cli.command {
        return ExitCode::from(fleet::run(&args.settings(), args.format()));
    }
    // A panic outside the collectors' catch_unwind is a bug; make it visible in the logs.
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        tracing::error!(thread = thread.name().unwrap_or("?"), panic = %info, "panic");
    }));
    let (ctx, opts, node) = match prepare(&cli) {
        Ok(p) => p,
        Err(code) => return code,
    };
    match &cli.command {
        Command::Serve(args) => {
            let plan = Plan {
                only: cli.collectors.clone(),
                interval: args.interval,
                intervals: args.collector_intervals.clone(),
                timeout: cli.collector_timeout,
            };
            let runners = match engine::runners(&node, &opts, &plan) {
                Ok(r) => r,
                Err(msg) => return usage(&msg),
            };
            let thresholds = rules_page::thresholds(&opts);
            match serve(args, runners, ctx, thresholds) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = format!("{e:#}"), "node-doctor failed");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Check(args) => {
            let plan = Plan {
                only: cli.collectors.clone(),
                interval: args.interval,
                intervals: Vec::new(),
                timeout: cli.collector_timeout,
            };
            let runners = match engine::runners(&node, &opts, &plan) {
                Ok(r) => r,
                Err(msg) => return usage(&msg),
            };
            // Each collector's worker thread waits for the second sample and runs it too.
            let linger = args
                .interval
                .saturating_add(std::time::Duration::from_secs(1));
            let runners: Vec<_> = runners.into_iter().map(|r| r.linger(linger)).collect();
            ExitCode::from(check(args, &runners, &ctx, &cli.collectors))
        }
        // Handled before the host is looked at.
        Command::Explain(_) | Command::Fleet(_) => ExitCode::SUCCESS,
    }
}

/// The command line. Run as `kubectl-node_doctor` (the kubectl plugin's name: a copy of or a
/// link to this binary on PATH), help and errors name it `kubectl node-doctor`.
fn parse_cli() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cmd = Cli::command();
    if args
        .first()
        .is_some_and(|a| is_kubectl_plugin(Path::new(a)))
    {
        cmd = cmd
            .bin_name("kubectl node-doctor")
            .name("kubectl node-doctor");
    }
    let matches = cmd.try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

/// True for the kubectl plugin's file name (`kubectl-node_doctor`, krew's naming for
/// `kubectl node-doctor`).
fn is_kubectl_plugin(argv0: &Path) -> bool {
    argv0
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "kubectl-node_doctor")
}

/// `node-doctor explain`: a lookup in the built-in catalogue, or a rule's own text; no host
/// is read.
fn explain(
    args: cli::ExplainArgs,
    rules_files: &[std::path::PathBuf],
    tuning: &cli::CollectorFlags,
) -> ExitCode {
    let args = match args.normalized() {
        Ok(a) => a,
        Err(msg) => return usage(&msg),
    };
    let format = match args.format {
        Format::Table => explain_cmd::Format::Table,
        Format::Json => explain_cmd::Format::Json,
    };
    let query = args.query.join(" ");
    // A rule id (`node-doctor explain load.high_load`, what NodeConditions and Events point
    // to): the rule's own text, with the rule files and thresholds of these flags.
    if let Some(id) = rule_id(&query) {
        let rules = match load_rules(rules_files) {
            Ok(r) => r,
            Err(msg) => return usage(&msg),
        };
        let thresholds = rules_page::thresholds(&tuning.options());
        if let Some(code) = explain_cmd::run_rule(&rules, id, args.lang.into(), format, &thresholds)
        {
            return ExitCode::from(u8::try_from(code).unwrap_or(EXIT_AGENT_FAILED));
        }
    }
    let code = explain_cmd::run(&query, args.lang.into(), format);
    ExitCode::from(u8::try_from(code).unwrap_or(EXIT_AGENT_FAILED))
}

/// What `serve` and `check` share before their collectors run: the rule files and NPD configs
/// loaded, the host root checked, the context, the collectors' options and the node context.
/// `Err` is the exit code after saying why.
fn prepare(cli: &Cli) -> Result<(CollectContext, CollectorOptions, collectors::Node), ExitCode> {
    let rules = load_rules(&cli.rules_files).map_err(|msg| usage(&msg))?;
    let npd_configs = load_npd_configs(&cli.tuning.npd_configs).map_err(|msg| usage(&msg))?;
    let host = HostPaths::new(&cli.host_root);
    if let Err(msg) = exit::check_host_root(&cli.host_root) {
        // Said on stderr whatever the log level: `check` logs only errors by default, and an
        // empty or wrong root must never pass for a quiet node.
        tracing::error!(host_root = %cli.host_root.display(), "{msg}");
        if !tracing::enabled!(tracing::Level::ERROR) {
            eprintln!("node-doctor: {msg}");
        }
        return Err(ExitCode::from(EXIT_AGENT_FAILED));
    }
    let ctx = CollectContext::new(
        node_name(cli.node_name.as_deref(), host.root()),
        netns::detect(&host),
    )
    .with_rules(rules);
    if let Command::Serve(args) = &cli.command {
        if args.kube.report {
            let naming = args.kube.naming();
            register_npd_conditions(&npd_configs, naming).map_err(|msg| usage(&msg))?;
            if naming == kube::classes::Naming::Nma {
                if let Some(pid) = kube::nma::running(&host) {
                    return Err(usage(&format!(
                        "--kube-names nma: the EKS node monitoring agent runs on this node (pid {pid} in {}): it writes the same condition types, and two writers reset each other's lastTransitionTime. Run one of them, or use node-doctor's own names",
                        host.proc().display()
                    )));
                }
            }
        }
    }
    let mut opts: CollectorOptions = cli.tuning.options();
    opts.npd.configs = npd_configs;
    if matches!(cli.command, Command::Check(_)) {
        opts = cli::for_check(opts);
    }
    // The node context every collector shares: built once, here. `check`'s collectors run
    // together, twice, `interval` apart: pid 1's unix socket and mount tables are read once
    // for all of them (collectors::node::shared; serve keeps no table between its rounds).
    let node = collectors::Node::new(host.clone());
    let node = match &cli.command {
        Command::Check(args) => node.sharing_reads(check_shared_window(args.interval)),
        _ => node,
    };
    Ok((ctx, opts, node))
}

/// How long a table one of `check`'s collectors read serves the others: both samples (the
/// second comes `interval` after the first, and a run takes well under a second). Nothing
/// `check` judges compares these tables between its samples: whether a daemon listens, where
/// a filesystem is mounted.
fn check_shared_window(interval: std::time::Duration) -> std::time::Duration {
    interval.saturating_add(std::time::Duration::from_secs(1))
}

/// The query as a rule id, when it looks like one: `<collector>.<name>`, one word.
fn rule_id(query: &str) -> Option<&str> {
    let q = query.trim();
    let (collector, name) = q.split_once('.')?;
    (collectors::registry::entry(collector).is_some()
        && !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'))
    .then_some(q)
}

/// The built-in rules with the operator's `--rules-file`s applied; a file that does not
/// load or check is a usage error.
fn load_rules(paths: &[std::path::PathBuf]) -> Result<Arc<RuleBook>, String> {
    let builtin = RuleBook::builtin();
    if paths.is_empty() {
        return Ok(builtin);
    }
    let book = builtin
        .with_override_files(paths)
        .map_err(|e| format!("--rules-file: {e}"))?;
    tracing::info!(files = ?book.overrides(), "rule overrides loaded");
    Ok(Arc::new(book))
}

/// Reads and checks the `--npd-config` files: one node-doctor cannot honour stops the agent.
fn load_npd_configs(
    paths: &[std::path::PathBuf],
) -> Result<Vec<collectors::npd::NpdConfig>, String> {
    let configs = paths
        .iter()
        .map(|p| collectors::npd::config::load(p).map_err(|e| format!("--npd-config: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if !configs.is_empty() {
        let files: Vec<&str> = configs.iter().map(|c| c.file.as_str()).collect();
        tracing::info!(files = ?files, "node-problem-detector configs loaded");
    }
    Ok(configs)
}

/// With `--kube-report`: the conditions of the `--npd-config` files become condition classes
/// the reporter writes (healthy: the config's default; set by the config's permanent rules).
/// A type named by two configs is one class (NPD's kernel-monitor.json and
/// readonly-monitor.json both name ReadonlyFilesystem); the first config's default is used.
fn register_npd_conditions(
    configs: &[collectors::npd::NpdConfig],
    naming: kube::classes::Naming,
) -> Result<(), String> {
    let mut classes: Vec<collectors::rules::NodeCondition> = Vec::new();
    for cfg in configs {
        for c in &cfg.conditions {
            if classes.iter().any(|k| k.ctype == c.kind) {
                continue;
            }
            let healthy_message = if c.message.is_empty() {
                format!(
                    "node-problem-detector config {}: no rule matched",
                    cfg.source
                )
            } else {
                c.message.clone()
            };
            classes.push(collectors::rules::NodeCondition {
                ctype: c.kind.clone(),
                healthy_reason: c.reason.clone(),
                healthy_message,
                npd: None,
                repair: false,
                nma: None,
                collectors: vec!["npd".into()],
            });
        }
    }
    if classes.is_empty() {
        return Ok(());
    }
    collectors::rules::RuleBook::set_operator_conditions(classes, naming)
        .map_err(|e| format!("--npd-config with --kube-report: {e}"))
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(EXIT_USAGE as u8)
}

fn init_logging(cli: &Cli) {
    let default = match cli.command {
        Command::Serve(_) => "info",
        Command::Check(_) | Command::Explain(_) | Command::Fleet(_) => "error",
    };
    let level = cli.log_level.as_deref().unwrap_or(default);
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = match cli.log_format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// `--node-name`, else `$NODE_NAME` (the downward API), else the host's hostname.
fn node_name(flag: Option<&str>, root: &Path) -> String {
    let from_env = std::env::var("NODE_NAME").ok();
    if let Some(n) = flag.or(from_env.as_deref()).map(str::trim) {
        if !n.is_empty() {
            return n.to_string();
        }
    }
    // Non-blocking, regular files only, capped: a FIFO or a huge file there is refused at
    // once and the agent's own hostname is used instead.
    let path = root.join("etc/hostname");
    match collectors::hostfs::read_text(&path, collectors::hostfs::cap::VALUE) {
        Ok(h) => {
            let h = h.trim();
            if !h.is_empty() && h.len() <= 253 {
                return h.to_string();
            }
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => tracing::warn!(error = %e, "host name not taken from the host root"),
    }
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown".to_string())
}

fn serve(
    args: &ServeArgs,
    runners: Vec<scheduler::Runner>,
    ctx: CollectContext,
    thresholds: rules_page::Thresholds,
) -> anyhow::Result<()> {
    let token = match &args.auth_token_file {
        None => None,
        Some(path) => {
            let loaded = token::read(path)?;
            token::warn_if_exposed(path, loaded.mode);
            Some(Arc::new(token::Token::new(loaded.token)))
        }
    };
    let names: Vec<String> = runners.iter().map(|r| r.name().to_string()).collect();
    // serve applies each rule's hysteresis (raise_after/clear_after of its rule file).
    let state = State::new(ctx.node_name.clone(), &names).with_hysteresis(Arc::clone(&ctx.rules));
    let stop = Arc::new(Stop::default());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("http")
        .build()
        .context("starting the tokio runtime")?;
    let listener = rt
        .block_on(async { server::listen(args.listen) })
        .with_context(|| format!("listening on {}", args.listen))?;
    let local = listener.local_addr().unwrap_or(args.listen);
    // Where NodeConditions, Events and /metrics' runbook links point (docs/deploy.md).
    let links = links::Links {
        base: links::Links::docs_url(&args.docs_url).map_err(anyhow::Error::msg)?,
        agent: links::Links::agent_address(std::env::var("POD_IP").ok().as_deref(), local),
    };
    let shared = Arc::new(Shared::with_links(state, links.clone()));
    // SIGHUP re-reads the token file; without a handler it would end the process.
    {
        let _rt = rt.enter();
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(hup) => {
                let source = args.auth_token_file.clone().zip(token.clone());
                rt.spawn(token::reload_on_sighup(hup, source));
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP; it will end the process")
            }
        }
    }
    tracing::info!(
        listen = %local,
        node = ctx.node_name.as_str(),
        collectors = ?names,
        interval_seconds = args.interval.as_secs_f64(),
        auth = token.is_some(),
        "node-doctor serving"
    );
    engine::spawn_schedulers(runners, ctx.clone(), Arc::clone(&shared), Arc::clone(&stop))
        .context("starting the scheduler threads")?;
    if args.kube.report {
        // Its own thread and runtime: the API server never slows collection or the HTTP server.
        kube::spawn(
            args.kube.config(links),
            ctx.node_name.clone(),
            Arc::clone(&shared),
        )
        .context("starting the Kubernetes reporter")?;
    }

    let app = Arc::new(server::App {
        shared,
        token,
        rules: Arc::clone(&ctx.rules),
        thresholds: Arc::new(thresholds),
    });
    rt.block_on(server::serve(listener, app, shutdown_signal()));
    stop.stop();
    // Hung collector threads are never joined: leave without waiting for them.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    tracing::info!("node-doctor stopped");
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; stop with SIGINT");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!(signal = "SIGTERM", "shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!(signal = "SIGINT", "shutting down"),
    }
}

fn check(
    args: &CheckArgs,
    runners: &[scheduler::Runner],
    ctx: &CollectContext,
    only: &[String],
) -> u8 {
    let names: Vec<String> = runners.iter().map(|r| r.name().to_string()).collect();
    // No hysteresis: check shows what its second sample sees.
    let state = std::sync::Mutex::new(State::new(ctx.node_name.clone(), &names));
    engine::run_all_once(runners, ctx, &state);
    std::thread::sleep(args.interval);
    engine::run_all_once(runners, ctx, &state);
    let snapshot = state
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .snapshot(time::OffsetDateTime::now_utc());
    let filter = Filter {
        lang: args.lang.into(),
        collectors: only.to_vec(),
        min_severity: None,
    };
    let view = View::new(&snapshot, &filter);
    let out = match args.format {
        Format::Json => api::to_json(&view),
        Format::Table => {
            // Colour only for a terminal, and never when NO_COLOR is set (no-color.org).
            let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            table::render(&view, colour).into_bytes()
        }
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(&out).and_then(|_| stdout.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("node-doctor: writing the report: {e}");
            return EXIT_AGENT_FAILED;
        }
    }
    for c in view.incomplete() {
        tracing::warn!(
            collector = c.name,
            status = c.status,
            reason = c.message.unwrap_or(""),
            "collector did not complete"
        );
    }
    view.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A table read in `check`'s first sample serves its second, `interval` later (plus
    /// the time the first sample's runs took).
    #[test]
    fn check_shares_tables_across_both_samples() {
        for interval in [
            Duration::from_millis(10),
            Duration::from_secs(1),
            Duration::MAX,
        ] {
            assert!(check_shared_window(interval) >= interval, "{interval:?}");
        }
        assert_eq!(
            check_shared_window(Duration::from_secs(1)),
            Duration::from_secs(2)
        );
    }
}
