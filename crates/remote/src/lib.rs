//! `ralph serve`: one broker per machine that lets a person answer a loop's question from a
//! phone's browser.
//!
//! # Theory of operation
//!
//! The broker is one more client of the question desk ([`ralph_protocol::Desk`]), like
//! `ralph answer`: it finds every loop through the registry, reads each loop's `state.json`
//! into plain views (`loops.rs`: the broker's views of the loops and what it may ask of them),
//! and answers through the same first-answer-wins path as every front end. If the broker is
//! down, nothing changes for the loops: they never wait for it. One watch of the registry and
//! of every loop's `.ralph/` (`streams.rs`) tells every open page and the bot when to look
//! again.
//!
//! One broker runs per machine: it holds `serve.lock` in ralph's state directory and writes its
//! pid and URL there, which is how `ralph status --json`, `notify_command` (`RALPH_ANSWER_URL`)
//! and the webhook (`answer_url`) know to print an answer link, and `ralph doctor` that it runs.
//!
//! Answer links are capabilities: `URL/a/TOKEN` opens one waiting question and nothing else.
//! The dashboard of every loop needs a paired browser (`devices.rs`). What each token is and
//! where its hash is kept: `ralph_protocol`'s `broker` module ([`ralph_protocol::mint_link`],
//! [`ralph_protocol::verify_link`]). The routes and the headers every response
//! carries: `server.rs`. What other crates use is the list below: [`serve`] and its options,
//! pairing and revoking, and the limits the broker keeps.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod bot_text;
mod conn;
mod devices;
mod loops;
mod page;
mod server;
mod streams;
mod telegram;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ralph_protocol::{AcquireError, BrokerLock, broker_running_in, broker_state_dir};

use server::{App, router};

pub use devices::{PairedBrowser, browsers as paired_browsers, revoke_browser};
pub use server::MAX_BODY_BYTES;
pub use streams::{MAX_STREAMS, MAX_STREAMS_PER_HOLDER, POLL_UNWATCHED};
pub use telegram::{
    Settings as TelegramSettings, paired_user as paired_telegram_user,
    settings as telegram_settings, unpair as unpair_telegram,
};

/// The most connections the broker serves at once; more are closed as they come.
pub const MAX_CONNECTIONS: usize = 256;

/// How long a client has to send a request's headers (after the TLS handshake, which has as
/// long again).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long open requests get to finish once the broker is asked to stop (event streams end
/// at once).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The address `ralph serve` listens on unless told otherwise.
pub const DEFAULT_BIND: &str = "127.0.0.1:7707";

/// How `ralph serve` was asked to run.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The address to listen on.
    pub bind: SocketAddr,
    /// A certificate chain and private key (PEM), to serve https.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Serve plain http on an address other than loopback, knowingly.
    pub insecure_http: bool,
    /// The URL answer links start with, when the broker is reached through a proxy
    /// (`tailscale serve`, an `ssh -L` on another port); by default the bound address.
    pub public_url: Option<String>,
}

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Plain http on a network address, not asked for.
    #[error(
        "{0} is not a loopback address: anyone who can reach it could read the questions and their links in clear. Give --tls-cert and --tls-key to serve https, reach a loopback broker through `tailscale serve` or `ssh -L` (see `ralph docs remote`), or pass --insecure-http if the network is yours alone."
    )]
    NeedsTls(SocketAddr),
    /// No state directory.
    #[error("no home directory to keep ralph's state in; set RALPH_STATE_DIR")]
    NoStateDir,
    /// Another broker runs, or the lock could not be taken.
    #[error(transparent)]
    Lock(#[from] AcquireError),
    /// `remote.toml` is unsafe or wrong.
    #[error("{0}")]
    Config(String),
    /// Listening or serving failed.
    // Said in the message and not chained as a source: `ralph: {err:#}` said it twice.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        cause: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServeError {
    let what = what.into();
    move |cause| ServeError::Io { what, cause }
}

/// Runs the broker until `shutdown` completes; `started` gets, once it listens, the URL of
/// where it listens and the URL its links start with (the same, unless `--public-url`).
pub async fn serve(
    opts: ServeOptions,
    started: impl FnOnce(&str, &str),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    if !opts.bind.ip().is_loopback() && opts.tls.is_none() && !opts.insecure_http {
        return Err(ServeError::NeedsTls(opts.bind));
    }
    let state_dir = broker_state_dir().ok_or(ServeError::NoStateDir)?;
    let registry = ralph_protocol::registry_dir().ok_or(ServeError::NoStateDir)?;
    let telegram = telegram::settings().map_err(ServeError::Config)?;
    let tls = match &opts.tls {
        None => None,
        Some((cert, key)) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            Some(
                axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
                    .await
                    .map_err(io(format!(
                        "could not load the certificate {} and key {} (both PEM, the key the certificate's own)",
                        cert.display(),
                        key.display()
                    )))?,
            )
        }
    };
    if opts.bind.ip().is_unspecified() && opts.public_url.is_none() {
        return Err(ServeError::Config(format!(
            "{} listens on every address, so no link can name it: give --public-url with the address phones reach it at (https://box.example.net:{})",
            opts.bind,
            opts.bind.port()
        )));
    }
    let streams = streams::Streams::new(registry).map_err(io("could not watch the loops"))?;
    let mut lock = BrokerLock::acquire(&state_dir)?;
    let std_listener = std::net::TcpListener::bind(opts.bind)
        .map_err(io(format!("could not listen on {}", opts.bind)))?;
    let local = std_listener
        .local_addr()
        .map_err(io("could not read the bound address"))?;
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    let listening = format!("{scheme}://{local}");
    let url = opts.public_url.clone().unwrap_or_else(|| listening.clone());
    lock.publish(&url)
        .map_err(io(format!("could not write {}", lock.path().display())))?;
    if let Some(settings) = &telegram {
        let changes = streams
            .open("telegram bot", None)
            .expect("the first place among the streams");
        telegram::start(settings, state_dir.clone(), url.clone(), changes)
            .map_err(io("could not start the Telegram bot"))?;
    }
    let app = Arc::new(App {
        state_dir,
        https: opts.tls.is_some() || url.starts_with("https://"),
        pairing: devices::Attempts::default(),
        public_origin: opts.public_url.as_deref().map(origin_of),
        streams,
    });
    started(&listening, &url);
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    let streams_of = Arc::clone(&app);
    tokio::spawn(async move {
        shutdown.await;
        streams_of.streams.close();
        stopper.graceful_shutdown(Some(SHUTDOWN_GRACE));
    });
    let mut server = axum_server::from_tcp(std_listener).handle(handle);
    // HTTP/1 only: the page needs nothing more, and a second protocol is a second surface.
    let builder = server.http_builder();
    *builder = builder.clone().http1_only();
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let capped = conn::Capped::new(MAX_CONNECTIONS);
    let service = router(app).into_make_service();
    let result = match tls {
        None => server.acceptor(capped).serve(service).await,
        Some(config) => {
            let tls = axum_server::tls_rustls::RustlsAcceptor::new(config)
                .handshake_timeout(HEADER_READ_TIMEOUT)
                .acceptor(capped);
            server.acceptor(tls).serve(service).await
        }
    }
    .map_err(io("the server failed"));
    drop(lock);
    result
}

/// Whether links starting with `url` open only on this machine: its host is a loopback
/// address (`127.0.0.1`, `[::1]`), `localhost`, or the unspecified address a `--bind
/// 0.0.0.0` broker's own URL has (a phone cannot go to `0.0.0.0`).
pub fn loopback_only(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
}

/// `scheme://host[:port]` of `url`.
fn origin_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let host = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{host}")
}

/// A one-time pairing link of `kind` for the running broker: `(link, QR code for a terminal)`.
pub fn pairing_link(kind: &str) -> Result<(String, String), String> {
    let dir = broker_state_dir()
        .ok_or("no home directory to keep ralph's state in; set RALPH_STATE_DIR")?;
    let broker = broker_running_in(&dir).map(|b| b.url).ok_or(
        "`ralph serve` is not running on this machine: start it first (in another terminal, or as the user service `ralph docs remote` describes), then pair",
    )?;
    if kind == "telegram" {
        let link = telegram::start_link(&dir)?;
        return Ok((link.clone(), qr(&link)));
    }
    let code = devices::new_pairing_code(&dir, kind, SystemTime::now())
        .map_err(|e| format!("could not store the pairing code in {}: {e}", dir.display()))?;
    let link = format!("{}/pair/{code}", broker);
    Ok((link.clone(), qr(&link)))
}

/// `text` as a QR code drawn with half blocks, for a terminal.
fn qr(text: &str) -> String {
    match qrcode::QrCode::new(text.as_bytes()) {
        Ok(code) => code
            .render::<qrcode::render::unicode::Dense1x2>()
            .dark_color(qrcode::render::unicode::Dense1x2::Light)
            .light_color(qrcode::render::unicode::Dense1x2::Dark)
            .quiet_zone(true)
            .build(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_links_are_told_apart_from_reachable_ones() {
        for url in [
            "http://127.0.0.1:7707",
            "http://127.0.0.1:7707/pair/x",
            "http://[::1]:7707",
            "http://localhost:7707",
            "https://LOCALHOST",
            "http://127.8.9.10",
            "https://0.0.0.0:7707",
            "https://[::]:7707",
        ] {
            assert!(super::loopback_only(url), "{url}");
        }
        for url in [
            "https://box.tailnet.ts.net",
            "http://192.168.1.20:7707",
            "http://[fe80::1]:7707",
            "https://localhost.example.com",
        ] {
            assert!(!super::loopback_only(url), "{url}");
        }
    }
}
