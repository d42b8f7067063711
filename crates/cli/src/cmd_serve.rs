//! `ralph serve`: the broker that lets a phone answer (see the `ralph-remote` crate), and
//! `ralph serve pair web`.

use anyhow::anyhow;
use ralph_remote::{ServeError, ServeOptions};

use crate::args::{PairWhat, ServeArgs, ServeCommand};
use crate::{CmdResult, Failure};

/// Serves until Ctrl-C or SIGTERM, or prints a pairing link.
pub fn run(args: &ServeArgs) -> CmdResult {
    if let Some(ServeCommand::Pair { what }) = &args.pair {
        let kind = match what {
            PairWhat::Web => "web",
            PairWhat::Telegram => "telegram",
        };
        let (link, qr) =
            ralph_remote::pairing_link(kind).map_err(|e| Failure::failed(anyhow!(e)))?;
        outln!("{qr}");
        outln!("Open this link on the device to pair (once, within 10 minutes):\n\n  {link}\n");
        if matches!(what, PairWhat::Web) && ralph_remote::loopback_only(&link) {
            eprintln!(
                "ralph: warning: {}",
                loopback_warning("this link and its QR code", &link)
            );
        }
        return Ok(0);
    }
    let opts = ServeOptions {
        bind: args.bind,
        tls: args.tls_cert.clone().zip(args.tls_key.clone()),
        insecure_http: args.insecure_http,
        public_url: args.public_url.clone(),
    };
    let telegram = matches!(ralph_remote::telegram::settings(), Ok(Some(_)));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(ralph_remote::serve(
        opts,
        |listening, links| {
            outln!("ralph serve: listening on {listening}");
            if links != listening {
                outln!("  links start with {links} (--public-url)");
            }
            outln!(
                "  `ralph status` now shows each waiting question's link;\n  `ralph serve pair web` pairs a browser for the dashboard. Ctrl-C stops."
            );
            if ralph_remote::loopback_only(links) {
                eprintln!("ralph serve: warning: {}", loopback_warning("its links", links));
            }
            if telegram {
                outln!(
                    "  Telegram: questions go to the bot in remote.toml; `ralph serve pair telegram` pairs you with it."
                );
            }
        },
        stopped(),
    ));
    match result {
        Ok(()) => Ok(0),
        Err(e @ (ServeError::NeedsTls(_) | ServeError::Config(_))) => {
            Err(Failure::usage(anyhow!(e)))
        }
        Err(e) => Err(Failure::failed(anyhow!(e))),
    }
}

/// Why a loopback link (`url`) does not open on a phone, and what does.
fn loopback_warning(what: &str, url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    format!(
        "{what} point at {authority}, this machine's loopback address: they open only in a browser on this machine (or through `ssh -L`). For a phone, reach the broker over your tailnet with `tailscale serve --bg {authority}` and restart `ralph serve` with --public-url set to the https address tailscale prints; or serve https on your network (--bind, --tls-cert, --tls-key). See docs/elsewhere.md"
    )
}

/// Completes on Ctrl-C or SIGTERM.
async fn stopped() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
