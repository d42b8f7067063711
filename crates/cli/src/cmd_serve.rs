//! `ralph serve`: the broker that lets a phone answer (see the `ralph-remote` crate), and
//! `ralph serve pair web`.

use anyhow::anyhow;
use ralph_remote::{ServeError, ServeOptions};

use crate::args::{PairWhat, ServeArgs, ServeCommand};
use crate::{CmdResult, Failure};

/// Serves until Ctrl-C or SIGTERM, or prints a pairing link.
pub fn run(args: &ServeArgs) -> CmdResult {
    match &args.pair {
        Some(ServeCommand::Devices) => return devices(),
        Some(ServeCommand::Revoke { which, all }) => return revoke(which.as_deref(), *all),
        _ => {}
    }
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
    let telegram = matches!(ralph_remote::telegram_settings(), Ok(Some(_)));
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
            if ralph_remote::loopback_only(links) {
                eprintln!("ralph serve: warning: {}", loopback_warning("its links", links));
            }
            outln!(
                "  `ralph status` now shows each waiting question's link;\n  `ralph serve pair web` pairs a browser for the dashboard. Ctrl-C stops."
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

fn state_dir() -> Result<std::path::PathBuf, Failure> {
    ralph_protocol::broker_state_dir().ok_or_else(|| {
        Failure::failed(anyhow!(
            "no home directory to keep ralph's state in; set RALPH_STATE_DIR"
        ))
    })
}

/// `ralph serve devices`: every paired browser and the Telegram user.
fn devices() -> CmdResult {
    let dir = state_dir()?;
    let browsers = ralph_remote::paired_browsers(&dir);
    let telegram = ralph_remote::paired_telegram_user(&dir);
    if browsers.is_empty() && telegram.is_none() {
        outln!(
            "Nothing is paired with ralph serve on this machine (`ralph serve pair web` pairs a browser)."
        );
        return Ok(0);
    }
    outln!("Paired with ralph serve on this machine:");
    for b in &browsers {
        let agent = b
            .user_agent
            .as_deref()
            .map(|ua| format!(": {}", ralph_protocol::clean(ua)))
            .unwrap_or_default();
        outln!("  {}  browser, paired {}{agent}", b.id, when(&b.paired_at));
    }
    if let Some((user, at)) = telegram {
        outln!("  telegram  Telegram user {user}, paired {}", when(&at));
    }
    outln!("Revoke one with `{} serve revoke ID`.", crate::program());
    Ok(0)
}

/// `2026-11-28 20:51 UTC` from an RFC 3339 time.
fn when(at: &str) -> String {
    match at.get(..16) {
        Some(t) => format!("{} UTC", t.replace('T', " ")),
        None => ralph_protocol::clean(at),
    }
}

/// `ralph serve revoke`: unpairs a browser, the Telegram user, or everything.
fn revoke(which: Option<&str>, all: bool) -> CmdResult {
    let dir = state_dir()?;
    let unpair_telegram = || {
        ralph_remote::unpair_telegram(&dir)
            .map_err(|e| Failure::failed(anyhow!("could not forget the Telegram user: {e}")))
    };
    if all {
        let mut n = 0;
        for b in ralph_remote::paired_browsers(&dir) {
            ralph_remote::revoke_browser(&dir, &b.id).map_err(|e| Failure::failed(anyhow!(e)))?;
            n += 1;
        }
        let telegram = unpair_telegram()?;
        outln!(
            "Revoked {n} browser{}{}.",
            if n == 1 { "" } else { "s" },
            if telegram {
                " and the Telegram user"
            } else {
                ""
            }
        );
        return Ok(0);
    }
    match which.unwrap_or_default() {
        "telegram" => {
            if !unpair_telegram()? {
                return Err(Failure::failed(anyhow!("no Telegram user is paired")));
            }
            outln!(
                "Revoked the Telegram user: their taps and messages are ignored from now on; `ralph serve pair telegram` pairs someone again."
            );
        }
        id => {
            let b = ralph_remote::revoke_browser(&dir, id)
                .map_err(|e| Failure::failed(anyhow!("{e}; `ralph serve devices` lists them")))?;
            outln!(
                "Revoked browser {}: it gets nothing from ralph serve any more; `ralph serve pair web` pairs it again.",
                b.id
            );
        }
    }
    Ok(0)
}

/// Why a loopback link (`url`) does not open on a phone, and what does.
fn loopback_warning(what: &str, url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let port = authority.rsplit_once(':').map_or("7707", |(_, p)| p);
    format!(
        "{what} point at {authority}, an address only this machine can open (a phone cannot, except through `ssh -L`). For a phone, reach the broker over your tailnet with `tailscale serve --bg {port}` and restart `ralph serve` with --public-url set to the https address tailscale prints; or give --public-url with the address your phone reaches this machine by. See `ralph docs elsewhere`"
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
