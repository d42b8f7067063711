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
        |url| {
            outln!(
                "ralph serve: listening on {url}\n  `ralph status --json` now gives each waiting question's answer_url;\n  `ralph serve pair web` pairs a browser for the dashboard. Ctrl-C stops."
            );
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
