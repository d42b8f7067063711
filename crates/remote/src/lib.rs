//! `ralph serve`: one broker per machine that lets a person answer a loop's question from a
//! phone's browser.
//!
//! # Theory of operation
//!
//! The broker is one more client of the question desk, like `ralph answer`: it finds every
//! loop through the registry, reads each loop's `state.json`, and answers through the same
//! first-answer-wins path ([`desk::submit`]). Every use of the `.ralph/` formats is in
//! [`desk`]. If the broker is down, nothing changes for the loops: they never wait for it.
//!
//! One broker runs per machine: it holds `serve.lock` in ralph's state directory and writes its
//! pid and URL there, which is how `ralph status --json`, `notify_command` (`RALPH_ANSWER_URL`)
//! and the webhook (`answer_url`) know to print an answer link, and `ralph doctor` that it runs.
//!
//! Answer links are capabilities: `URL/a/TOKEN` opens one waiting question and nothing else.
//! The dashboard of every loop needs a paired browser ([`devices`]). What each token is and
//! where its hash is kept: [`ralph_protocol::broker`]. The routes and the headers every response
//! carries: [`server`].

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod desk;
pub mod devices;
pub mod page;
pub mod server;
pub mod telegram;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

pub use server::{App, MAX_BODY_BYTES, router};

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
        "{0} is not a loopback address: anyone who can reach it could read the questions and their links in clear. Give --tls-cert and --tls-key to serve https, reach a loopback broker through `tailscale serve` or `ssh -L` (see the README), or pass --insecure-http if the network is yours alone."
    )]
    NeedsTls(SocketAddr),
    /// No state directory.
    #[error("no home directory to keep ralph's state in; set RALPH_STATE_DIR")]
    NoStateDir,
    /// Another broker runs, or the lock could not be taken.
    #[error(transparent)]
    Lock(#[from] desk::AcquireError),
    /// `remote.toml` is unsafe or wrong.
    #[error("{0}")]
    Config(String),
    /// Listening or serving failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServeError {
    let what = what.into();
    move |source| ServeError::Io { what, source }
}

/// Runs the broker until `shutdown` completes; `started` gets the URL once it listens.
pub async fn serve(
    opts: ServeOptions,
    started: impl FnOnce(&str),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    if !opts.bind.ip().is_loopback() && opts.tls.is_none() && !opts.insecure_http {
        return Err(ServeError::NeedsTls(opts.bind));
    }
    let state_dir = desk::state_dir().ok_or(ServeError::NoStateDir)?;
    let telegram = telegram::settings().map_err(ServeError::Config)?;
    let mut lock = desk::BrokerLock::acquire(&state_dir)?;
    let std_listener = std::net::TcpListener::bind(opts.bind)
        .map_err(io(format!("could not listen on {}", opts.bind)))?;
    let local = std_listener
        .local_addr()
        .map_err(io("could not read the bound address"))?;
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    let url = opts
        .public_url
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{local}"));
    lock.publish(&url)
        .map_err(io(format!("could not write {}", lock.path().display())))?;
    if let Some(settings) = &telegram {
        telegram::start(settings, state_dir.clone(), url.clone())
            .map_err(io("could not watch the loops for the Telegram bot"))?;
    }
    let app = Arc::new(App {
        state_dir,
        https: opts.tls.is_some() || url.starts_with("https://"),
        pairing: devices::Attempts::default(),
        public_origin: opts.public_url.as_deref().map(origin_of),
    });
    started(&url);
    let result = match opts.tls {
        None => {
            std_listener
                .set_nonblocking(true)
                .map_err(io("could not set up the listener"))?;
            let listener = tokio::net::TcpListener::from_std(std_listener)
                .map_err(io("could not set up the listener"))?;
            axum::serve(listener, router(app))
                .with_graceful_shutdown(shutdown)
                .await
                .map_err(io("the server failed"))
        }
        Some((cert, key)) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let config = axum_server::tls_rustls::RustlsConfig::from_pem_file(&cert, &key)
                .await
                .map_err(io(format!(
                    "could not load the certificate {} and key {}",
                    cert.display(),
                    key.display()
                )))?;
            let handle = axum_server::Handle::new();
            let stopper = handle.clone();
            tokio::spawn(async move {
                shutdown.await;
                stopper.graceful_shutdown(Some(std::time::Duration::from_secs(2)));
            });
            axum_server::from_tcp_rustls(std_listener, config)
                .handle(handle)
                .serve(router(app).into_make_service())
                .await
                .map_err(io("the server failed"))
        }
    };
    drop(lock);
    result
}

/// `scheme://host[:port]` of `url`.
fn origin_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let host = rest.split('/').next().unwrap_or(rest);
    format!("{scheme}://{host}")
}

/// A one-time pairing link of `kind` for the running broker: `(link, QR code for a terminal)`.
pub fn pairing_link(kind: &str) -> Result<(String, String), String> {
    let dir = desk::state_dir()
        .ok_or("no home directory to keep ralph's state in; set RALPH_STATE_DIR")?;
    let broker = desk::broker_url(&dir).ok_or(
        "`ralph serve` is not running on this machine: start it first (in another terminal, or as the user service described in the README), then pair",
    )?;
    if kind == "telegram" {
        let link = telegram::pairing_link(&dir)?;
        return Ok((link.clone(), qr(&link)));
    }
    let code = devices::new_pairing_code(&dir, kind, SystemTime::now())
        .map_err(|e| format!("could not store the pairing code in {}: {e}", dir.display()))?;
    let link = format!("{}/pair/{code}", broker);
    Ok((link.clone(), qr(&link)))
}

/// `text` as a QR code drawn with half blocks, for a terminal.
pub fn qr(text: &str) -> String {
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
