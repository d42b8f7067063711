//! The webhook: one JSON body that Slack, Discord and Gotify read as is, POSTed with a time
//! limit on the whole exchange.

use std::time::Duration;

use ralph_protocol::{cut, one_line};

use super::notice::{QuestionNotice, TITLE, project_name};

/// The longest human-readable text in the webhook body, in characters: Discord refuses
/// `content` over 2000.
const WEBHOOK_TEXT_CHARS: usize = 1900;

/// The JSON body posted to the webhook; see the module docs for who reads which field.
pub(super) fn webhook_body(notice: &QuestionNotice) -> String {
    let text = cut(&summary(notice), WEBHOOK_TEXT_CHARS);
    serde_json::json!({
        "text": escape_slack(&text),
        "content": text,
        "allowed_mentions": { "parse": [] },
        "title": TITLE,
        "message": text,
        "question": notice.question,
        "options": notice.options,
        "default": notice.default,
        "deadline": notice.deadline,
        "iteration": notice.iteration,
        "root": notice.root,
        "answer_command": notice.answer_command,
        "answer_url": notice.answer_url,
    })
    .to_string()
}

/// The question as a short message for a person reading it on a phone.
pub(super) fn summary(notice: &QuestionNotice) -> String {
    let mut text = format!(
        "{TITLE} ({}, iteration {}):\n{}",
        project_name(&notice.root),
        notice.iteration,
        cut(notice.question.trim(), 1200)
    );
    if !notice.options.is_empty() {
        text.push_str("\nOptions:");
        for (i, option) in notice.options.iter().enumerate() {
            text.push_str(&format!("\n{}. {}", i + 1, one_line(option, 100)));
        }
    }
    if let Some(default) = &notice.default {
        text.push_str(&format!("\nIf nobody answers: {}", one_line(default, 100)));
    }
    if let Some(deadline) = &notice.deadline {
        text.push_str(&format!("\nDeadline: {deadline}"));
    }
    text.push_str(&format!("\nAnswer with: {}", notice.answer_command));
    if let Some(url) = &notice.answer_url {
        text.push_str(&format!("\nor open: {url}"));
    }
    text
}

/// Escapes what Slack reads as control sequences (`<!channel>`, `<@U123>`, links).
pub(super) fn escape_slack(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub(super) fn post_webhook(url: &str, body: &str, timeout: Duration) -> Result<(), String> {
    use ureq::tls::{RootCerts, TlsConfig};
    // The system's certificate store (SSL_CERT_FILE and SSL_CERT_DIR are honoured), so a CA
    // that a company installs on its machines for its proxy is trusted here as well.
    let tls = TlsConfig::builder()
        .root_certs(RootCerts::PlatformVerifier)
        .unversioned_rustls_crypto_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .build();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .timeout_connect(Some(timeout))
        .http_status_as_error(true)
        .tls_config(tls)
        .build()
        .into();
    let result = agent
        .post(url)
        .content_type("application/json")
        .send(body.as_bytes());
    match result {
        Ok(_) => Ok(()),
        Err(ureq::Error::Timeout(_)) => Err(format!(
            "timed out after {}",
            humantime::format_duration(timeout)
        )),
        Err(ureq::Error::StatusCode(code)) => Err(format!("the server answered HTTP {code}")),
        Err(ureq::Error::HostNotFound) => Err("host not found".into()),
        Err(ureq::Error::ConnectionFailed) => Err("could not connect".into()),
        Err(ureq::Error::Io(e)) => Err(e.to_string()),
        // Other errors may quote the URL; webhook URLs carry their secret in the path.
        Err(e) => Err(e.to_string().replace(url, &redact_url(url))),
    }
}

/// The URL without its secrets, for messages: scheme and host only (`https://hooks.slack.com/…`).
///
/// Slack and Discord put the webhook's secret in the path, Gotify in the query, basic auth in
/// the user info; a warning on screen or in a log must show none of them.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => ("", url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let tail = if end < rest.len() { "/…" } else { "" };
    format!("{scheme}{host}{tail}")
}
