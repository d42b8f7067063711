//! The HTTP side of the broker: routes as plain functions over [`App`], limits and security
//! headers as layers.
//!
//! | route | what |
//! |---|---|
//! | `GET /a/TOKEN` | the question an answer link opens (404 unless it waits) |
//! | `POST /a/TOKEN` | answers it: JSON `{"answer": "text"}`, `{"option": 2}`, `{"options": [1, 3], "answer": "note"}`, or the page's form; `{"action": "skip"}` or `{"action": "extend"}` (five more minutes; Telegram's button adds an hour) |
//! | `GET /a/TOKEN/events` | server-sent events: `closed` (with how) or `changed` |
//! | `GET /` , `GET /events` | the dashboard of every loop, for a paired device, and its stream: `loops` (the list, as HTML) at once and on every change, new loops and questions included |
//! | `GET /pair/CODE` | pairs this browser (sets the device cookie) |
//! | `GET /assets/page.js`, `/assets/page.css` | the page's script and style, from the binary |
//!
//! Every response carries a strict Content-Security-Policy (scripts and styles from this origin
//! only, nothing inline, nothing from elsewhere), `Referrer-Policy: no-referrer` (an answer link
//! is a secret and must not leak in a `Referer`), `X-Content-Type-Options: nosniff`,
//! `X-Frame-Options: DENY` and `Cache-Control: no-store`. Request bodies are capped at
//! [`MAX_BODY_BYTES`]; a request gets [`REQUEST_TIMEOUT`] to be answered (streams of events
//! excepted once they started). A POST whose `Origin` (or `Sec-Fetch-Site`) says it comes from
//! another site is refused: another page cannot answer for you even if it knows a link.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use futures_util::Stream;
use serde::Deserialize;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;

use crate::desk::{self, Outcome, Reply, Sender};
use crate::devices;
use crate::page;

/// The largest request body taken, in bytes: an answer's cap plus room for its encoding.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// How long a request may take before it is answered with 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const PAGE_JS: &[u8] = include_bytes!("../assets/page.js");
const PAGE_CSS: &[u8] = include_bytes!("../assets/page.css");

/// What every handler shares.
#[derive(Debug)]
pub struct App {
    /// ralph's state directory (links, devices, pairing codes).
    pub state_dir: PathBuf,
    /// Whether the broker is reached over https (the device cookie is then `Secure`).
    pub https: bool,
    /// Failed pairing attempts, for the rate limit.
    pub pairing: devices::Attempts,
    /// The origin (`https://box.tailnet.ts.net`) of `--public-url`, when a proxy in front of
    /// the broker may pass on another `Host` than the one the browser used.
    pub public_origin: Option<String>,
}

/// The broker's routes and layers over `app`.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(dashboard))
        .route("/events", get(dashboard_events))
        .route("/a/{token}", get(question_page).post(answer))
        .route("/a/{token}/events", get(question_events))
        .route("/pair/{code}", get(pair))
        .route("/assets/page.js", get(js))
        .route("/assets/page.css", get(css))
        .fallback(not_found)
        .with_state(app)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .layer(header_layer(header::CONTENT_SECURITY_POLICY, CSP))
        .layer(header_layer(header::REFERRER_POLICY, "no-referrer"))
        .layer(header_layer(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(header_layer(header::X_FRAME_OPTIONS, "DENY"))
        .layer(header_layer(header::CACHE_CONTROL, "no-store"))
}

fn header_layer(
    name: header::HeaderName,
    value: &'static str,
) -> SetResponseHeaderLayer<HeaderValue> {
    SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value))
}

async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        PAGE_JS,
    )
}

async fn css() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        PAGE_CSS,
    )
}

/// The one answer for every path, token or code that is not (or no longer) valid.
async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, Html(page::not_found())).into_response()
}

async fn question_page(State(app): State<Arc<App>>, Path(token): Path<String>) -> Response {
    let Some(q) = desk::verify_link(&app.state_dir, &token).and_then(|l| desk::pending(&l)) else {
        return not_found().await;
    };
    Html(page::question(
        &q,
        &format!("/a/{token}"),
        SystemTime::now(),
    ))
    .into_response()
}

/// A POST body: the page's script sends JSON; without script, the form sends `option` (once
/// per pick) and `answer`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    #[serde(default)]
    answer: Option<String>,
    #[serde(default)]
    option: Option<usize>,
    #[serde(default)]
    options: Vec<usize>,
    /// `skip` or `extend` instead of an answer.
    #[serde(default)]
    action: Option<String>,
}

impl AnswerBody {
    fn from_form(body: &[u8]) -> AnswerBody {
        let mut out = AnswerBody::default();
        for (k, v) in form_urlencoded::parse(body) {
            match &*k {
                "answer" => out.answer = Some(v.into_owned()),
                "action" => out.action = Some(v.into_owned()),
                "option" => match v.parse() {
                    Ok(n) => out.options.push(n),
                    // Out of range on purpose: the reply then says which numbers exist.
                    Err(_) => out.options.push(0),
                },
                _ => {}
            }
        }
        out
    }

    fn reply(self) -> Reply {
        let mut picked = self.options;
        picked.extend(self.option);
        let note = self.answer.unwrap_or_default();
        match picked.is_empty() {
            true => Reply::Text(note),
            false => Reply::Picks(picked, note),
        }
    }
}

/// Whether a state-changing request comes from a page of another site: its `Origin` is
/// neither the `Host` it was sent to nor the broker's public origin.
fn foreign(headers: &HeaderMap, public_origin: Option<&str>) -> bool {
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|s| s == "cross-site" || s == "same-site")
    {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        // Not a browser's cross-site request: browsers send Origin with every POST.
        return false;
    };
    if public_origin.is_some_and(|p| origin.as_bytes().eq_ignore_ascii_case(p.as_bytes())) {
        return false;
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest);
    match (origin_host, host) {
        (Some(o), Some(h)) => !o.eq_ignore_ascii_case(h),
        _ => true,
    }
}

async fn answer(
    State(app): State<Arc<App>>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if foreign(&headers, app.public_origin.as_deref()) {
        return reply(
            StatusCode::FORBIDDEN,
            "foreign_origin",
            "Refused: this answer was sent from another site's page.",
            &headers,
        );
    }
    let Some(link) = desk::verify_link(&app.state_dir, &token) else {
        return not_found().await;
    };
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let parsed = match json {
        true => serde_json::from_slice::<AnswerBody>(&body).map_err(|e| e.to_string()),
        false => Ok(AnswerBody::from_form(&body)),
    };
    let body = match parsed {
        Ok(b) => b,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!(
                    "The body is not an answer ({e}). Send {{\"answer\": \"text\"}} or {{\"option\": 2}}."
                ),
                &headers,
            );
        }
    };
    let action = match body.action.as_deref() {
        None => None,
        Some("skip") => Some(desk::Action::Skip),
        Some("extend") => Some(desk::Action::Extend(desk::PAGE_EXTEND)),
        Some(other) => {
            return reply(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("Unknown action {other:?}: it is \"skip\" or \"extend\"."),
                &headers,
            );
        }
    };
    // Part of the hash, not of the token: clarifications.md may be committed; the link is secret.
    let who = format!("answer link {}", &link.hash[..6]);
    let reply_to = body.reply();
    let outcome = tokio::task::spawn_blocking(move || match action {
        Some(a) => desk::act(&link, a),
        None => desk::submit(&link, &reply_to, &Sender::Web(who)),
    })
    .await
    .unwrap_or_else(|e| Outcome::Invalid(format!("the answer could not be written: {e}")));
    let (status, code) = match &outcome {
        Outcome::Accepted { .. } => (StatusCode::OK, "answered"),
        Outcome::Requested(_) => (StatusCode::ACCEPTED, "requested"),
        Outcome::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid"),
        Outcome::AlreadyAnswered(_) => (StatusCode::CONFLICT, "already_answered"),
        Outcome::Skipped => (StatusCode::CONFLICT, "skipped"),
        Outcome::NotWaiting(_) => (StatusCode::CONFLICT, "not_waiting"),
    };
    reply(status, code, &outcome.message(), &headers)
}

/// The reply to a POST: JSON for the page's script and other programs, a page for a form.
fn reply(status: StatusCode, code: &str, message: &str, headers: &HeaderMap) -> Response {
    let wants_html = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.starts_with("text/html"));
    if wants_html {
        let title = if status.is_success() {
            "Answered"
        } else {
            "Not answered"
        };
        return (status, Html(page::message(title, message))).into_response();
    }
    let body = serde_json::json!({"status": code, "message": message});
    (status, axum::Json(body)).into_response()
}

type Events = Sse<std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>>>;

async fn question_events(State(app): State<Arc<App>>, Path(token): Path<String>) -> Response {
    let Some(link) = desk::verify_link(&app.state_dir, &token) else {
        return not_found().await;
    };
    let Some(first) = desk::pending(&link) else {
        return not_found().await;
    };
    let Ok(mut changes) = desk::watch(&link.root) else {
        return not_found().await;
    };
    let stream = async_stream(move |tx| async move {
        loop {
            if changes.next().await.is_none() {
                return;
            }
            let link = link.clone();
            let now = tokio::task::spawn_blocking(move || {
                (desk::pending(&link), desk::closed_how(&link))
            })
            .await
            .ok();
            let event = match now {
                Some((Some(q), _)) if q == first => continue,
                Some((Some(_), _)) => Event::default().event("changed").data("changed"),
                Some((None, how)) => Event::default().event("closed").data(how),
                None => return,
            };
            let _ = tx.send(event).await;
            return;
        }
    });
    sse(stream)
}

/// The dashboard's stream: a `loops` event with the whole list (what the page's `<main>`
/// holds) at once, and again whenever a loop starts, ends, asks, is answered or moves on.
async fn dashboard_events(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if devices::device(&app.state_dir, &headers).is_none() {
        return not_found().await;
    }
    let Ok(mut changes) = desk::watch_loops() else {
        return not_found().await;
    };
    let dir = app.state_dir.clone();
    let stream = async_stream(move |tx| async move {
        let mut links = Links::new();
        let mut shown: Option<Vec<desk::LoopView>> = None;
        while changes.next().await.is_some() {
            let dir = dir.clone();
            let looked = tokio::task::spawn_blocking(move || {
                let loops = with_links(&dir, desk::loops(), &mut links);
                (loops, links)
            })
            .await;
            let Ok((loops, kept)) = looked else { return };
            links = kept;
            let views: Vec<desk::LoopView> = loops.iter().map(|(l, _)| l.clone()).collect();
            if shown.as_ref() == Some(&views) {
                continue;
            }
            shown = Some(views);
            let body = page::dashboard_body(&loops, SystemTime::now());
            if tx
                .send(Event::default().event("loops").data(body))
                .await
                .is_err()
            {
                return;
            }
        }
    });
    sse(stream)
}

/// The answer links a dashboard shows, by loop and question: made once per question, not at
/// every update (each is a file in the state directory).
type Links = HashMap<(PathBuf, desk::QuestionId), String>;

/// `loops`, each with its waiting question's page (a new answer link, unless `links` has one).
fn with_links(
    dir: &std::path::Path,
    loops: Vec<desk::LoopView>,
    links: &mut Links,
) -> Vec<(desk::LoopView, Option<String>)> {
    links.retain(|(root, id), _| {
        loops.iter().any(|l| {
            l.question
                .as_ref()
                .is_some_and(|q| &q.root == root && &q.id == id)
        })
    });
    loops
        .into_iter()
        .map(|l| {
            let link = l.question.as_ref().and_then(|q| {
                let key = (q.root.clone(), q.id.clone());
                if let Some(link) = links.get(&key) {
                    return Some(link.clone());
                }
                let link = format!("/a/{}", desk::mint_link(dir, &q.root, &q.id).ok()?);
                links.insert(key, link.clone());
                Some(link)
            });
            (l, link)
        })
        .collect()
}

/// A stream of events fed by `produce` through a channel; it ends when `produce` returns.
fn async_stream<F, Fut>(produce: F) -> impl Stream<Item = Result<Event, Infallible>> + Send
where
    F: FnOnce(tokio::sync::mpsc::Sender<Event>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(produce(tx));
    futures_util::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) },
    )
}

fn sse(stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static) -> Response {
    let boxed: Events = Sse::new(Box::pin(stream));
    boxed.keep_alive(KeepAlive::default()).into_response()
}

async fn dashboard(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if devices::device(&app.state_dir, &headers).is_none() {
        return (
            StatusCode::NOT_FOUND,
            Html(page::message(
                "Not paired",
                "This browser is not paired with this ralph. On the machine, run `ralph serve pair web` and open the link it prints.",
            )),
        )
            .into_response();
    }
    let dir = app.state_dir.clone();
    let loops =
        tokio::task::spawn_blocking(move || with_links(&dir, desk::loops(), &mut Links::new()))
            .await
            .unwrap_or_default();
    Html(page::dashboard(&loops, SystemTime::now())).into_response()
}

async fn pair(State(app): State<Arc<App>>, Path(code): Path<String>) -> Response {
    if !app.pairing.allow(SystemTime::now()) {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            Html(page::message(
                "Too many attempts",
                "Too many pairing attempts failed; wait a minute, then open the link again.",
            )),
        )
            .into_response();
    }
    let Some(cookie) = devices::pair_web(&app.state_dir, &code) else {
        app.pairing.failed(SystemTime::now());
        return not_found().await;
    };
    let secure = if app.https { "; Secure" } else { "" };
    let set = format!(
        "{}={cookie}; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000{secure}",
        devices::COOKIE
    );
    let mut res = Redirect::to("/").into_response();
    if let Ok(v) = HeaderValue::from_str(&set) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}
